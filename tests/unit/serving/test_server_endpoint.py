"""The model server's requests and answers (runner.serving.server.Endpoint), with a stand-in
model: no KServe, no TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from runner.serving.modelio import InputError
from runner.serving.server import Endpoint, validation_message
from runner.serving.signature import Signature, TensorSpec


class Doubling:
    """Stands in for modelio's models: `y` = 2·`x`, and `z` = the row sums for signature two."""

    runtime = "tensorflow"

    def __init__(self) -> None:
        x = TensorSpec("x", "float32", (None, 3))
        self.signatures = {
            "serving_default": Signature("serving_default", (x,), (TensorSpec("y", "float32", (None, 3)),)),
            "two": Signature("two", (x,), (TensorSpec("y", "float32", (None, 3)), TensorSpec("z", "float32", (None,)))),
        }

    def default_signature(self) -> Signature:
        return self.signatures["serving_default"]

    def predict(self, inputs, signature=None):
        x = inputs["x"]
        if signature == "two":
            return {"y": x * 2, "z": x.sum(axis=1)}
        return {"y": x * 2}


@pytest.fixture
def endpoint() -> Endpoint:
    return Endpoint(Doubling(), "demo", 4)


def test_instances_answer_predictions_and_inputs_answer_outputs(endpoint):
    assert endpoint.v1_predict({"instances": [[1, 2, 3]]}) == {"predictions": [[2.0, 4.0, 6.0]]}
    assert endpoint.v1_predict({"inputs": {"x": [[1, 2, 3]]}}) == {"outputs": [[2.0, 4.0, 6.0]]}
    assert endpoint.v1_predict({"inputs": [[1, 1, 1]]}) == {"outputs": [[2.0, 2.0, 2.0]]}


def test_several_outputs_are_rows_of_mappings_or_a_mapping_of_columns(endpoint):
    rows = endpoint.v1_predict({"signature_name": "two", "instances": [[1, 2, 3], [0, 0, 1]]})
    assert rows == {"predictions": [{"y": [2.0, 4.0, 6.0], "z": 6.0}, {"y": [0.0, 0.0, 2.0], "z": 1.0}]}
    columns = endpoint.v1_predict({"signature_name": "two", "inputs": {"x": [[1, 2, 3]]}})
    assert columns == {"outputs": {"y": [[2.0, 4.0, 6.0]], "z": [6.0]}}


def test_a_json_body_sent_without_its_content_type_is_still_taken(endpoint):
    assert endpoint.v1_predict(b'{"instances": [[1, 2, 3]]}') == {"predictions": [[2.0, 4.0, 6.0]]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"instances": [[1, 2]]}, "input 'x': shape (1, 2)"),
        ({"instances": [["a", "b", "c"]]}, "input 'x': values are not float32"),
        ({"instances": [[1, 2, 3], [1]]}, "input 'x'"),
        ({"inputs": {"w": [[1, 2, 3]]}}, "input 'w' is not in signature"),
        ({"inputs": {}}, "input 'x' is missing"),
        ({"instances": [[1, 2, 3]], "signature_name": "nope"}, "signature_name 'nope' is not in the model"),
        ({"rows": []}, '"instances"'),
        ([1, 2], "JSON object"),
        (b"instances=1&x=2", "the body is not JSON"),
    ],
)
def test_malformed_requests_are_input_errors_naming_what_is_wrong(endpoint, body, message):
    with pytest.raises(InputError, match=None) as caught:
        endpoint.v1_predict(body)
    assert message in str(caught.value)


def test_v2_inputs_are_checked_against_the_default_signature(endpoint):
    assert endpoint.v2_infer({"x": np.ones((2, 3), np.float32)})["y"].tolist() == [[2.0] * 3] * 2
    with pytest.raises(InputError, match="input 'x': shape"):
        endpoint.v2_infer({"x": np.ones((2, 4), np.float32)})


def test_status_and_metadata_in_tensorflow_servings_format(endpoint):
    assert endpoint.status(True) == {
        "model_version_status": [{"version": "4", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]
    }
    assert endpoint.status(False)["model_version_status"][0]["state"] == "UNAVAILABLE"
    metadata = endpoint.metadata()
    assert metadata["model_spec"] == {"name": "demo", "signature_name": "", "version": "4"}
    default = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert default["inputs"]["x"] == {
        "dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "3", "name": ""}], "unknown_rank": False}, "name": "x",
    }
    assert default["method_name"] == "tensorflow/serving/predict"
    assert endpoint.v2_types(outputs=False) == [{"name": "x", "datatype": "FP32", "shape": [-1, 3]}]


def test_fastapi_validation_errors_become_one_line_naming_the_input():
    body = {"inputs": [{"name": "x", "datatype": "FP32", "data": [1, 2, 3]}]}
    errors = [{"loc": ("body", "InferenceRequest", "inputs", 0, "shape"), "msg": "Field required", "type": "missing"}]
    assert validation_message(errors, body) == "input 'x': shape: Field required"
    assert validation_message(errors, b'{"inputs": [{"name": "y"}]}') == "input 'y': shape: Field required"
    assert validation_message(errors, None) == "inputs[0]: shape: Field required"
    decode = [{"loc": ("body", 0), "msg": "JSON decode error", "type": "json_invalid"}]
    assert validation_message(decode, None) == "the body is not JSON: JSON decode error"
    assert validation_message([{"loc": ("body", "id"), "msg": "bad"}], None) == "invalid request body: id: bad"
    assert validation_message([], None) == "invalid request body"
