"""Inputs against a signature (numpy only): a sample file's forms, requests' forms, one message
naming the input for anything that does not fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runner.serving.modelio import InputError, conform_all, load_sample, max_abs_difference, request_values, synthesize
from runner.serving.signature import Signature, TensorSpec

ONE = Signature(
    "serving_default", (TensorSpec("features", "float32", (None, 4)),), (TensorSpec("y", "float32", (None, 2)),)
)
TWO = Signature("serving_default", (TensorSpec("a", "float32", (None, 2)), TensorSpec("ids", "int64", (None,))), ())


def test_npy_npz_and_json_samples_become_the_signatures_inputs(tmp_path):
    np.save(tmp_path / "s.npy", np.ones((3, 4)))
    got = load_sample(tmp_path / "s.npy", ONE)
    assert got["features"].dtype == np.float32 and got["features"].shape == (3, 4)
    np.savez(tmp_path / "s.npz", a=np.zeros((2, 2)), ids=np.array([1, 2]))
    got = load_sample(tmp_path / "s.npz", TWO)
    assert got["ids"].dtype == np.int64
    (tmp_path / "rows.json").write_text(json.dumps({"instances": [{"a": [1, 2], "ids": 3}]}))
    assert load_sample(tmp_path / "rows.json", TWO)["a"].shape == (1, 2)
    (tmp_path / "cols.json").write_text(json.dumps({"inputs": [[1, 2, 3, 4]]}))
    assert load_sample(tmp_path / "cols.json", ONE)["features"].shape == (1, 4)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("s.npy", np.ones((2, 5)), "s.npy: input 'features': shape (2, 5) does not match the signature's (None, 4)"),
        ("s.npy", np.ones((4,)), "s.npy: input 'features': shape (4,) does not match"),
        ("s.json", {"instances": [["a", "b", "c", "d"]]}, "s.json: input 'features': values are not float32"),
        ("s.json", {"instances": [[1, 2], [1, 2, 3, 4]]}, "input 'features'"),
        ("s.json", {"instances": [], "inputs": []}, 'either "instances" (rows) or "inputs"'),
        (
            "s.json",
            {"inputs": {"feature": [[1, 2, 3, 4]]}},
            "input 'feature' is not in signature 'serving_default' (its inputs: features)",
        ),
        ("s.json", "not json", "cannot be read as .json"),
        ("s.npy", b"\x93NUMPY garbage", "cannot be read as .npy"),
    ],
)
def test_a_sample_that_does_not_fit_is_one_message_naming_the_input(tmp_path, name, content, message):
    path = tmp_path / name
    if isinstance(content, np.ndarray):
        np.save(path, content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "not json":
        path.write_text("{nope")
    else:
        path.write_text(json.dumps(content))
    with pytest.raises(InputError) as caught:
        load_sample(path, ONE)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_pickled_npy_is_refused_not_loaded(tmp_path):
    np.save(tmp_path / "s.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="cannot be read"):
        load_sample(tmp_path / "s.npy", ONE)


def test_a_missing_input_is_named():
    with pytest.raises(InputError, match="input 'ids' is missing"):
        conform_all({"a": [[1, 2]]}, TWO)


def test_rows_of_a_two_input_model_must_be_mappings():
    with pytest.raises(InputError, match="each row must be a {name: value} mapping"):
        request_values({"instances": [[1, 2]]}, TWO)


def test_synthesised_inputs_fit_the_signature():
    values = synthesize(TWO, rows=3)
    assert values["a"].shape == (3, 2) and values["a"].dtype == np.float32
    assert values["ids"].shape == (3,) and values["ids"].dtype == np.int64
    conform_all(values, TWO)
    with pytest.raises(InputError, match="no known rank"):
        synthesize(Signature("s", (TensorSpec("x", "float32", None),), ()))


def test_differences_are_over_shared_numeric_outputs():
    a = {"y": np.array([1.0, 2.0]), "label": np.array(["x"], dtype=object)}
    assert max_abs_difference(a, {"y": np.array([1.0, 2.5]), "label": np.array(["z"], dtype=object)}) == 0.5
    assert max_abs_difference(a, {"y": np.array([1.0])}) == float("inf")
