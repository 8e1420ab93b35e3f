"""Two answers compared: read from every answer format tftrain serves, judged by top class or by
values, and never an exception on an answer another party wrote."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.replay.compare import Agreement, compare, is_classifier, read_answer


def test_tensorflow_serving_rows_columns_and_open_inference_tensors_read_alike():
    rows = read_answer({"predictions": [[0.1, 0.9], [0.8, 0.2]]})
    columns = read_answer({"outputs": [[0.1, 0.9], [0.8, 0.2]]})
    tensors = read_answer(
        {"outputs": [{"name": "predictions", "shape": [2, 2], "datatype": "FP32", "data": [0.1, 0.9, 0.8, 0.2]}]}
    )
    assert np.array_equal(rows.outputs["predictions"], columns.outputs["output"])
    assert np.array_equal(rows.outputs["predictions"], tensors.outputs["predictions"])
    several = read_answer({"predictions": [{"a": 1, "b": [1, 2]}, {"a": 2, "b": [3, 4]}]})
    assert several.outputs["a"].tolist() == [1, 2] and several.outputs["b"].shape == (2, 2)


def test_a_classifier_agrees_on_the_top_class_whatever_the_scores():
    a, b = read_answer({"predictions": [[0.1, 0.9]]}), read_answer({"predictions": [[0.4, 0.6]]})
    assert is_classifier(a) and is_classifier(b)
    same = compare(a, b, 1e-3, Agreement.TOP_CLASS)
    assert same.same and same.max_abs["predictions"] == pytest.approx(0.3)
    flipped = compare(a, read_answer({"predictions": [[0.6, 0.4]]}), 1e-3, Agreement.TOP_CLASS)
    assert not flipped.same


def test_values_agree_within_the_tolerance_only():
    a = read_answer({"predictions": [1.0, 2.0]})
    assert not is_classifier(a)
    assert compare(a, read_answer({"predictions": [1.0005, 2.0]}), 1e-3, Agreement.VALUES).same
    near = compare(a, read_answer({"predictions": [1.01, 2.0]}), 1e-3, Agreement.VALUES)
    assert (
        not near.same
        and near.max_abs["predictions"] == pytest.approx(0.01)
        and near.mean_abs["predictions"] == pytest.approx(0.005)
    )


def test_another_shape_or_another_output_never_agrees():
    a = read_answer({"predictions": [[1.0, 2.0]]})
    shaped = compare(a, read_answer({"predictions": [[1.0, 2.0, 3.0]]}), 1.0, Agreement.VALUES)
    assert not shaped.same and math.isinf(shaped.max_abs["predictions"])
    assert not compare(a, read_answer({"outputs": {"other": [[1.0, 2.0]]}}), 1.0, Agreement.VALUES).same


def test_a_scoring_scripts_answer_compares_numbers_by_path_and_the_rest_by_equality():
    a = read_answer({"label": "cat", "scores": [0.2, 0.8]})
    assert compare(a, read_answer({"label": "cat", "scores": [0.2, 0.8001]}), 1e-3, Agreement.VALUES).same
    assert not compare(a, read_answer({"label": "dog", "scores": [0.2, 0.8]}), 1e-3, Agreement.VALUES).same
    assert not compare(
        a, read_answer({"label": "cat", "other": [0.2, 0.8]}), 1e-3, Agreement.VALUES
    ).same  # same numbers, elsewhere
    assert read_answer("plain text").other == (("", "plain text"), ("paths", ()))


@pytest.mark.parametrize(
    "body",
    [
        {"predictions": [[1, 2], [3]]},  # ragged
        {"predictions": [["a", "b"]]},  # text where numbers are expected
        {"predictions": [{"a": 1}, {"b": 2}]},  # rows naming different outputs
        {"outputs": [{"name": "x", "data": ["a"]}]},
        {"predictions": 1e400},
    ],
)
def test_answers_that_are_no_tensors_are_no_answer_not_an_exception(body):
    assert read_answer(body) is None


def test_nan_in_an_answer_is_no_tensor_to_compare():
    assert read_answer({"predictions": [float("nan")]}) is None  # the replay then compares the two answers' bodies
