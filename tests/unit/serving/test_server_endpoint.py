"""The model server's requests and answers (runner.serving.server.Endpoint), with a stand-in
model: no KServe, no TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from runner.serving.metadata import validation_message
from runner.serving.modelio import InputError
from runner.serving.server import Endpoint
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
        ({"instances": [["a", "b", "c"]]}, "input 'x': the string 'a' is not float32"),
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
    def tensor(value):
        return [{"name": "x", "datatype": "FP32", "shape": list(value.shape), "data": value}]

    assert endpoint.v2_infer(tensor(np.ones((2, 3), np.float32)))["y"].tolist() == [[2.0] * 3] * 2
    with pytest.raises(InputError, match="input 'x': shape"):
        endpoint.v2_infer(tensor(np.ones((2, 4), np.float32)))


def test_status_and_metadata_in_tensorflow_servings_format(endpoint):
    assert endpoint.status(True) == {
        "model_version_status": [
            {"version": "4", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    }
    assert endpoint.status(False)["model_version_status"][0]["state"] == "UNAVAILABLE"
    metadata = endpoint.metadata()
    assert metadata["model_spec"] == {"name": "demo", "signature_name": "", "version": "4"}
    default = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert default["inputs"]["x"] == {
        "dtype": "DT_FLOAT",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "3", "name": ""}], "unknown_rank": False},
        "name": "x",
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


def _call(app, method: str, path: str, body: bytes, chunks: int = 1, headers=()) -> tuple[int, dict, list]:
    """One request through an ASGI app, the body in `chunks` messages: (status, JSON answer, what reached the app behind)."""
    import asyncio
    import json

    behind = []

    async def inner(scope, receive, send):
        behind.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    parts = [body[len(body) * i // chunks : len(body) * (i + 1) // chunks] for i in range(chunks)]
    messages = [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1} for index, part in enumerate(parts)
    ]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app(inner)({"type": "http", "method": method, "path": path, "headers": list(headers)}, receive, send))
    status = sent[0]["status"]
    answer = json.loads(sent[1]["body"]) if sent[1]["body"] else {}
    return status, answer, behind


def test_the_predict_route_is_answered_in_front_of_kserve(endpoint):
    from runner.serving.fastpath import FastPredict

    ready = [True]
    app = lambda inner: FastPredict(inner, endpoint, lambda: ready[0])  # noqa: E731
    assert _call(app, "POST", "/v1/models/demo:predict", b'{"instances": [[1, 2, 3]]}', chunks=3)[:2] == (
        200,
        {"predictions": [[2.0, 4.0, 6.0]]},
    )
    status, answer, _ = _call(app, "POST", "/v1/models/demo:predict", b'{"instances": [[1, 2]]}')
    assert status == 400 and answer["error"].startswith("input 'x': shape (1, 2)")
    assert _call(app, "POST", "/v1/models/demo:predict", b"x=1&y=2")[:2] == (
        400,
        {"error": "the body is not JSON: send a JSON object with Content-Type: application/json"},
    )
    v2 = b'{"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}'
    assert _call(app, "POST", "/v2/models/demo/infer", v2)[:2] == (
        200,
        {
            "model_name": "demo",
            "model_version": None,
            "id": "r1",
            "parameters": None,
            "outputs": [
                {"name": "y", "shape": [1, 3], "datatype": "FP32", "parameters": None, "data": [2.0, 4.0, 6.0]}
            ],
        },
    )
    # every other route, another model's, and binary v2 tensors are KServe's
    for method, path in (("GET", "/v1/models/demo"), ("POST", "/v1/models/other:predict")):
        assert _call(app, method, path, b"{}")[2] == [path]
    assert _call(app, "POST", "/v2/models/demo/infer", b"{}", headers=[(b"inference-header-content-length", b"2")])[
        2
    ] == ["/v2/models/demo/infer"]
    ready[0] = False
    assert _call(app, "POST", "/v1/models/demo:predict", b'{"instances": [[1, 2, 3]]}')[0] == 503


def test_a_model_that_fails_inside_is_a_500_with_one_line(endpoint):
    from runner.serving.fastpath import FastPredict

    def broken(inputs, signature=None):
        raise RuntimeError("device lost\nmore detail")

    endpoint.model.predict = broken
    status, answer, _ = _call(
        lambda inner: FastPredict(inner, endpoint, lambda: True),
        "POST",
        "/v1/models/demo:predict",
        b'{"instances": [[1, 2, 3]]}',
    )
    assert (status, answer) == (500, {"error": "RuntimeError: device lost"})


class Counting(Doubling):
    """Doubling that counts its calls, and fails on a row of 13s (one bad request among others)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = []

    def predict(self, inputs, signature=None):
        self.calls.append(len(inputs["x"]))
        if (inputs["x"] == 13).all(axis=1).any():
            raise ValueError("thirteen")
        return super().predict(inputs, signature)


def _concurrently(app, bodies: list[bytes]) -> list[tuple[int, dict]]:
    """Requests that arrive together (one turn of the event loop), each through `app`."""
    import asyncio
    import json

    async def one(body):
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent = []

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)

        await app({"type": "http", "method": "POST", "path": "/v1/models/demo:predict"}, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    async def together():
        return await asyncio.gather(*(one(body) for body in bodies))

    return asyncio.run(together())


def test_batching_runs_requests_that_meet_as_one_call_and_answers_each_its_own():
    from runner.serving.fastpath import FastPredict

    model = Counting()
    app = FastPredict(None, Endpoint(model, "demo", 1), lambda: True, batch=True)
    bodies = [b'{"instances": [[%d, 0, 0]]}' % n for n in range(5)] + [b'{"instances": [[1, 1, 1], [2, 2, 2]]}']
    answers = _concurrently(app, bodies)
    assert model.calls == [7]  # seven rows, one call
    assert [a for _, a in answers[:5]] == [{"predictions": [[2.0 * n, 0.0, 0.0]]} for n in range(5)]
    assert answers[5] == (200, {"predictions": [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]})


def test_a_failing_member_of_a_batch_fails_alone():
    from runner.serving.fastpath import FastPredict

    model = Counting()
    app = FastPredict(None, Endpoint(model, "demo", 1), lambda: True, batch=True)
    answers = _concurrently(
        app, [b'{"instances": [[1, 2, 3]]}', b'{"instances": [[13, 13, 13]]}', b'{"instances": [[1, 2]]}']
    )
    assert answers[0] == (200, {"predictions": [[2.0, 4.0, 6.0]]})
    assert answers[1] == (500, {"error": "ValueError: thirteen"})
    assert answers[2][0] == 400 and "shape (1, 2)" in answers[2][1]["error"]  # refused before any batch
    assert model.calls == [2, 1, 1]  # the batch failed: each on its own


def test_outputs_that_do_not_come_back_row_for_row_are_not_split():
    from runner.serving.fastpath import PredictRequest, predict_batch

    class Summing(Doubling):
        def predict(self, inputs, signature=None):
            return {"total": np.asarray(inputs["x"].sum())}  # one value for the whole batch

    signature = Doubling().default_signature()
    requests = [PredictRequest(signature, {"x": np.ones((1, 3), np.float32) * n}, True) for n in (1, 2)]
    assert [float(result["total"]) for result in predict_batch(Summing(), requests)] == [3.0, 6.0]
