"""The gate's result as data: serving.json and export.json, written by processes that ran the
user's model, are read field by field; anything else is the gate's failure, one line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from runner.errors import ModelGateError
from runner.serving.gate import GateResult
from runner.serving.gate_report import OnnxExport, Prediction, ServingReport

CHECKED = {  # as runner.serving.model_check writes it (sorted keys)
    "format": "keras",
    "load_seconds": 0.42,
    "path": "model.keras",
    "predictions": {"dense": {"dtype": "float32", "shape": [4, 10]}},
    "sample": "synthesised from the signature",
    "signature": "serving_default",
    "signatures": {"serving_default": {"inputs": [{"name": "x", "shape": [None, 64], "dtype": "float32"}]}},
    "tensorflow": "2.18.1",
}
EXPORTED = {
    "converter": "tf2onnx 1.17.0",
    "file": "model.onnx",
    "max_abs_diff": 7.5e-9,
    "opset": 17,
    "outputs_missing": [],
    "tensorflow": "2.18.1",
}


def _written(tmp_path: Path, name: str, document) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_serving_json_reads_as_a_report_and_gives_back_the_same_document(tmp_path):
    report = ServingReport.read(_written(tmp_path, "serving.json", CHECKED))
    assert report.predictions == {"dense": Prediction((4, 10), "float32")} and report.weights is None
    assert report.as_json() == {**CHECKED, "checked_in": "", "onnx": None}
    assert list(report.as_json()) == [*CHECKED, "checked_in", "onnx"]  # the version's JSON, key for key
    onnx = OnnxExport.read(_written(tmp_path, "export.json", EXPORTED))
    keras_json = ServingReport.read(_written(tmp_path, "serving.json", {**CHECKED, "weights": "model.weights.h5"}))
    assert keras_json.as_json()["weights"] == "model.weights.h5"
    done = replace(report, checked_in="the run's environment", onnx=onnx)
    assert done.as_json() == {**CHECKED, "checked_in": "the run's environment", "onnx": EXPORTED}
    assert GateResult(tmp_path, done, 1.0).onnx == tmp_path / "model.onnx"
    assert GateResult(tmp_path, report, 1.0).onnx is None


@pytest.mark.parametrize(
    "document, named",
    [
        ([], "is not a JSON object"),
        ({**CHECKED, "tensorflow": None}, "tensorflow is not a string"),
        ({key: value for key, value in CHECKED.items() if key != "signature"}, "signature is not a string"),
        ({**CHECKED, "load_seconds": True}, "load_seconds is not a number"),
        ({**CHECKED, "predictions": ["dense"]}, "predictions is not a JSON object"),
        ({**CHECKED, "predictions": {"dense": {"shape": "4x10", "dtype": "float32"}}}, "predictions.dense is not"),
        ({**CHECKED, "predictions": {"a\nb": {"shape": [True], "dtype": "float32"}}}, r"predictions.a\\nb is not"),
        ({**CHECKED, "weights": 3}, "weights is not a string"),
    ],
)
def test_a_serving_json_the_check_did_not_write_fails_the_gate_in_one_line(tmp_path, document, named):
    with pytest.raises(ModelGateError, match=named) as caught:
        ServingReport.read(_written(tmp_path, "serving.json", document))
    assert "\n" not in str(caught.value) and "serving.json" in str(caught.value)


@pytest.mark.parametrize(
    "document, named",
    [
        ({**EXPORTED, "max_abs_diff": "0"}, "max_abs_diff is not a number"),
        ({**EXPORTED, "outputs_missing": [1]}, "outputs_missing is not a list of strings"),
        ({**EXPORTED, "opset": 17.5}, "opset is not a whole number"),
    ],
)
def test_an_export_json_the_export_did_not_write_fails_in_one_line(tmp_path, document, named):
    with pytest.raises(ModelGateError, match=named):
        OnnxExport.read(_written(tmp_path, "export.json", document))


def test_an_unreadable_file_is_the_gates_failure(tmp_path):
    (tmp_path / "serving.json").write_bytes(b"\xff{")
    with pytest.raises(ModelGateError, match="serving.json cannot be read"):
        ServingReport.read(tmp_path / "serving.json")
    with pytest.raises(ModelGateError, match="export.json cannot be read"):
        OnnxExport.read(tmp_path / "export.json")


def test_a_file_nested_past_the_recursion_limit_is_the_gates_failure(tmp_path):
    (tmp_path / "serving.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelGateError, match="serving.json cannot be read"):
        ServingReport.read(tmp_path / "serving.json")


def test_a_version_keeps_the_scoring_files_the_gate_recorded(tmp_path):
    report = ServingReport.read(_written(tmp_path, "serving.json", CHECKED))
    scoring = {"script": "score.py", "sha256": "a", "sample_request": "b", "answer": None}
    kept = GateResult(tmp_path, replace(report, scoring=scoring), 1.0).files()
    assert [name for name in kept if name.startswith("scoring/")] == ["scoring/score.py", "scoring/sample-request.json"]
    assert kept["scoring/score.py"] == tmp_path / "scoring" / "score.py"
