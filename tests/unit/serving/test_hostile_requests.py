"""The model server under attack, without KServe or TensorFlow: the guard (routes, bearer token,
body limit), the input checks on both protocols (through the fast path, as a client reaches them),
the lifeline's rules, and `tftrain serve`'s refusals (one line, exit 2, the key never printed)."""

from __future__ import annotations

import asyncio
import json
import re

import numpy as np
import pytest
from hostile import assert_refused
from purity import in_process

from runner.errors import UsageError
from runner.serving import guard, supervision
from runner.serving.fastpath import FastPredict
from runner.serving.server import Endpoint
from runner.serving.signature import Signature, TensorSpec

KEY = "k3y-Only_The-Client-Knows"


class Doubling:
    """A stand-in model: `y` = 2·`x`, x float32 (None, 3)."""

    runtime = "tensorflow"
    signatures = {
        "serving_default": Signature(
            "serving_default", (TensorSpec("x", "float32", (None, 3)),), (TensorSpec("y", "float32", (None, 3)),)
        )
    }

    def default_signature(self) -> Signature:
        return self.signatures["serving_default"]

    def predict(self, inputs, signature=None):
        return {"y": inputs["x"] * 2}


def behind_the_guard(token: bytes | None = None, max_body: int = 1 << 20, openapi: bool = False):
    """The guard in front of the fast path, in front of a stand-in for KServe that answers 204."""

    async def kserve(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    fast = FastPredict(kserve, Endpoint(Doubling(), "demo", 1), lambda: True)
    return guard.Guard(fast, guard.routes("demo", openapi), token, max_body)


def call(app, method: str, path: str, body: bytes = b"", headers=(), chunks: int = 1, declared: bool = True):
    """One request: (status, JSON answer or None, response headers); the body in `chunks` messages,
    with a Content-Length header unless `declared` is False (chunked transfer)."""
    parts = [body[len(body) * i // chunks : len(body) * (i + 1) // chunks] for i in range(chunks)]
    messages = [{"type": "http.request", "body": part, "more_body": i < len(parts) - 1} for i, part in enumerate(parts)]
    read = []
    sent = []

    async def receive():
        read.append(1)
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    all_headers = [(name.lower().encode(), value.encode()) for name, value in headers]
    if declared:
        all_headers.append((b"content-length", str(len(body)).encode()))
    asyncio.run(app({"type": "http", "method": method, "path": path, "headers": all_headers}, receive, send))
    answer = json.loads(sent[1]["body"]) if len(sent) > 1 and sent[1]["body"] else None
    return sent[0]["status"], answer, dict(sent[0]["headers"]), len(read)


ROW = b'{"instances": [[1, 2, 3]]}'


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/repository/models/demo/unload"),
        ("POST", "/v2/repository/models/demo/load"),
        ("POST", "/v2/repository/index"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/redoc"),
        ("GET", "/metrics"),
        ("POST", "/v1/models/other:predict"),
        ("GET", "/v2/models/demo/versions/1"),
    ],
)
def test_management_and_unknown_routes_do_not_exist(method, path):
    for app in (behind_the_guard(), behind_the_guard(KEY.encode())):
        status, answer, _, _ = call(app, method, path, b"{}", [("Authorization", f"Bearer {KEY}")])
        assert status == 404 and KEY not in json.dumps(answer), answer


def test_openapi_and_docs_only_when_asked_for_and_behind_the_key():
    app = behind_the_guard(KEY.encode(), openapi=True)
    assert call(app, "GET", "/openapi.json")[0] == 401
    assert call(app, "GET", "/openapi.json", headers=[("Authorization", f"Bearer {KEY}")])[0] == 204
    assert call(app, "GET", "/docs", headers=[("Authorization", f"Bearer {KEY}")])[0] == 204


def test_health_is_open_and_everything_else_needs_the_key_in_constant_time_comparison():
    app = behind_the_guard(KEY.encode())
    for path in ("/", "/v2/health/live", "/v2/health/ready", "/v1/models/demo", "/v2/models/demo/ready"):
        assert call(app, "GET", path)[0] == 204, path
    wrong = [
        [],
        [("Authorization", "Bearer nope")],
        [("Authorization", KEY)],
        [("Authorization", f"Basic {KEY}")],
        [("Authorization", f"Bearer {KEY}x")],
        [("Authorization", "Bearer"), ("Authorization", f"Bearer {KEY}")],
    ]
    for headers in wrong:
        for method, path, body in (
            ("POST", "/v1/models/demo:predict", ROW),
            ("GET", "/v1/models/demo/metadata", b""),
            ("GET", "/v2", b""),
        ):
            status, answer, response_headers, _ = call(app, method, path, body, headers)
            assert (status, response_headers.get(b"www-authenticate")) == (401, b"Bearer"), (headers, path)
            assert KEY not in json.dumps(answer)
    for scheme in ("Bearer", "bearer"):
        status, answer, _, _ = call(app, "POST", "/v1/models/demo:predict", ROW, [("Authorization", f"{scheme} {KEY}")])
        assert (status, answer) == (200, {"predictions": [[2.0, 4.0, 6.0]]})


def test_a_route_answers_only_its_methods():
    status, answer, _, _ = call(behind_the_guard(), "GET", "/v1/models/demo:predict")
    assert status == 405 and "POST" in answer["error"]


def test_a_declared_body_over_the_limit_is_413_before_a_byte_is_read():
    app = behind_the_guard(max_body=1000)
    status, answer, headers, reads = call(app, "POST", "/v1/models/demo:predict", b"[" * 5000)
    assert (status, headers.get(b"connection"), reads) == (413, b"close", 0)
    assert "1000 bytes" in answer["error"]
    status, _, _, reads = call(
        app, "POST", "/v1/models/demo:predict", headers=[("Content-Length", "9" * 5000)], declared=False
    )
    assert (status, reads) == (413, 0)  # a number too long for int() is no traceback


def test_a_chunked_body_is_counted_and_refused_once_past_the_limit():
    app = behind_the_guard(max_body=1000)
    status, _, headers, reads = call(app, "POST", "/v1/models/demo:predict", b"[" * 5000, chunks=50, declared=False)
    assert (status, headers.get(b"connection")) == (413, b"close")
    assert reads == 11  # 100 bytes a message: refused on the one that passes 1000, the rest never read
    body = b'{"instances": [[1, 2, 3]]}' + b" " * 900
    assert call(app, "POST", "/v1/models/demo:predict", body, chunks=9, declared=False)[0] == 200  # within: whole


V1_REFUSED = [
    (b'{"instances": [[1, 2, null]]}', "null is not float32"),
    (b'{"instances": [[1, 2, "1"]]}', "the string '1' is not float32"),
    (b'{"instances": [[1, 2, true]]}', "true is not float32"),
    (b'{"instances": [[1, 2, 3.5e38]]}', "3.5e+38 overflows float32"),
    (b'{"instances": [[1, 2, NaN]]}', "NaN, which is not a JSON number"),
    (b'{"instances": [[1, 2, -Infinity]]}', "-Infinity, which is not a JSON number"),
    (b'{"instances": [[1, 2, 1e999]]}', "inf is not a finite number"),
    (b'{"instances": [[1, 2, 3]], "instances": [[4, 5, 6]]}', "'instances' twice"),
    (b'{"inputs": {"x": [[1, 2, 3]], "x": [[4, 5, 6]]}}', "'x' twice"),
    (b'{"inputs": {"w": [[1, 2, 3]]}}', "input 'w' is not in signature"),
    (b'{"instances": [[1, 2, 3], [1, 2]]}', "rows of different lengths"),
    (b'{"instances": ' + b"[" * 100 + b"1" + b"]" * 100 + b"}", "nested more than 32 deep"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
]


def _v2(data, shape=(1, 3), datatype="FP32", name="x", twice=False) -> bytes:
    tensor = {"name": name, "datatype": datatype, "shape": list(shape), "data": data}
    return json.dumps({"inputs": [tensor, tensor] if twice else [tensor]}).encode().replace(b'"@NaN@"', b"NaN")


V2_REFUSED = [
    (_v2([1, 2, None]), "null is not float32"),
    (_v2([1, 2, "1"]), "the string '1' is not float32"),
    (_v2([1, 2, True]), "true is not float32"),
    (_v2([1, 2, 3.5e38]), "3.5e+38 overflows float32"),
    (_v2([1, 2, "@NaN@"]), "NaN, which is not a JSON number"),
    (_v2([1, 2, 3], shape=(-1, 3)), "shape must be a list of sizes ≥ 0"),
    (_v2([1, 2, 3], twice=True), "input 'x' is given twice"),
    (_v2([1, 2, 3], name="w"), "input 'w' is not in signature"),
    (_v2([1, 2, 3], datatype="FP64"), "datatype 'FP64', the signature takes FP32"),
    (_v2([1, 2], shape=(1, 3)), "2 values cannot fill shape [1, 3]"),
    (_v2([1, 2, 3, 4, 5, 6], shape=(1, 6)), "shape (1, 6) does not match"),
]


@pytest.mark.parametrize(("body", "reason"), V1_REFUSED)
def test_tensorflow_serving_requests_are_checked_not_coerced(body, reason):
    status, answer, _, _ = call(behind_the_guard(), "POST", "/v1/models/demo:predict", body)
    assert status == 400 and reason in answer["error"], answer


@pytest.mark.parametrize(("body", "reason"), V2_REFUSED)
def test_open_inference_requests_are_checked_the_same_way(body, reason):
    status, answer, _, _ = call(behind_the_guard(), "POST", "/v2/models/demo/infer", body)
    assert status == 400 and reason in answer["error"], answer


def test_both_protocols_take_what_fits():
    app = behind_the_guard()
    assert call(app, "POST", "/v1/models/demo:predict", b'{"inputs": {"x": [[1, 2.5, -3e3]]}}')[:2] == (
        200,
        {"outputs": [[2.0, 5.0, -6e3]]},
    )
    status, answer, _, _ = call(app, "POST", "/v2/models/demo/infer", _v2([[1, 2, 3], [4, 5, 6]], shape=(2, 3)))
    assert status == 200 and answer["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]


def test_a_large_body_is_checked_in_a_thread_with_the_same_answers():
    rows = 30_000  # ~0.4 MB: past OFF_LOOP_BYTES
    good = json.dumps({"instances": [[1, 2, 3]] * rows}).encode()
    app = behind_the_guard(max_body=1 << 24)
    status, answer, _, _ = call(app, "POST", "/v1/models/demo:predict", good)
    assert status == 200 and len(answer["predictions"]) == rows
    bad = good[:-2] + b", [1, 2, null]]}"
    status, answer, _, _ = call(app, "POST", "/v1/models/demo:predict", bad)
    assert status == 400 and "null is not float32" in answer["error"]


def test_tensors_kserve_reads_from_a_binary_request_meet_the_same_checks():
    endpoint = Endpoint(Doubling(), "demo", 1)

    def tensor(data, datatype="FP32", shape=(1, 3)):
        return [{"name": "x", "datatype": datatype, "shape": list(shape), "data": data}]

    assert endpoint.v2_infer(tensor(np.ones((1, 3), np.float32)))["y"].tolist() == [[2.0, 2.0, 2.0]]
    refused = [
        (tensor(np.array([[1, 2, np.nan]], np.float32)), "nan is not a finite number"),
        (tensor(np.ones((1, 3), np.float64), "FP64"), "datatype 'FP64', the signature takes FP32"),
        (tensor(np.ones((1, 3), np.float64)), "the values are float64"),
        (tensor([1, 2, None]), "null is not float32"),  # JSON tensors beside binary ones: never coerced
        (tensor(["1", 2, 3]), "the string '1' is not float32"),
        (tensor([1, 2, 3], shape=(-1, 3)), "shape must be a list of sizes ≥ 0"),
        (tensor([1, 2, 3]) * 2, "given twice"),
    ]
    for tensors, reason in refused:
        with pytest.raises(ValueError, match=re.escape(reason)):
            endpoint.v2_infer(tensors)


def test_a_binary_request_with_a_large_json_part_is_refused_before_kserve_parses_it():
    app = behind_the_guard()
    for size in (b"300000", b"-1", b"x"):
        status, answer, _, _ = call(
            app, "POST", "/v2/models/demo/infer", b"{}", [("Inference-Header-Content-Length", size.decode())]
        )
        assert status == 400 and "Inference-Header-Content-Length" in answer["error"]
    # KServe's
    assert call(app, "POST", "/v2/models/demo/infer", b"{}", [("Inference-Header-Content-Length", "2")])[0] == 204


def test_the_token_must_be_a_header_value_and_leaves_the_environment():
    environ = {guard.TOKEN_VARIABLE: KEY}
    assert guard.token_from(environ) == KEY.encode() and guard.TOKEN_VARIABLE not in environ
    assert guard.token_from({}) is None
    for bad in ("", "   ", "with space", "line\nbreak", "ké"):
        with pytest.raises(ValueError):
            guard.token_from({guard.TOKEN_VARIABLE: bad})


def test_the_port_line_is_read_back():
    assert supervision.port_from_line(supervision.PORT_LINE.format(port=43123, host="::1") + "\n") == 43123
    assert supervision.port_from_line("tftrain-serve: port x on y") is None


@pytest.mark.parametrize(
    ("argv", "mention"),
    [
        (["--port", "99999"], "--port 99999: a port is 0 to 65535"),
        (["--port", "-1"], "--port -1: a port is 0 to 65535"),
        (["--port", str(2**70)], "a port is 0 to 65535"),
        (["--max-body-bytes", "0"], "--max-body-bytes 0"),
        (["--auth-token-env", "TFTRAIN_TEST_NO_SUCH_KEY"], "$TFTRAIN_TEST_NO_SUCH_KEY is not set"),
        (["--auth-token-env", "TFTRAIN_TEST_EMPTY_KEY"], "$TFTRAIN_TEST_EMPTY_KEY is empty"),
        (["--auth-token-env", "TFTRAIN_TEST_SPACED_KEY"], "characters a header cannot carry"),
    ],
)
def test_serve_refuses_bad_options_in_one_line_before_anything_starts(tmp_path, argv, mention):
    spaced = f"{KEY} and more"
    env = {
        "PATH": "/usr/bin:/bin",
        "TFTRAIN_HOME": str(tmp_path / "home"),
        "TFTRAIN_CACHE_DIR": str(tmp_path / "cache"),
        "TFTRAIN_TEST_EMPTY_KEY": "",
        "TFTRAIN_TEST_SPACED_KEY": spaced,
    }
    result = in_process(["tftrain", "serve", "digits@v1", *argv], cwd=tmp_path, env=env)
    assert_refused(result, UsageError, mention)
    assert spaced not in result.stdout + result.stderr
    assert not (tmp_path / "home").exists() and not (tmp_path / "cache").exists()
