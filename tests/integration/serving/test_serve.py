"""`tftrain serve` for real: KServe in the serving environment (built once per machine in the
lasting cache, ~3 min the first time), a registered SavedModel, every route over http.client."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
import serving_models
from conftest import TFTRAIN
from serving_models import INPUT, NAME, OUTPUT, lasting_cache_path, register_version

saved_model = serving_models.saved_model  # the session fixture, visible to this module's tests


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    lines: list[str]

    def request(self, method: str, path: str, body=None, content_type: str | None = "application/json"):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = json.dumps(body) if body is not None and not isinstance(body, (str, bytes)) else body
            headers = {"Content-Type": content_type} if content_type and data is not None else {}
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def started(saved_model, home, *options: str, tensorflow: str | None = None):
    register_version(home, saved_model, tensorflow=tensorflow)
    port = free_port()
    env = {**os.environ, "TFTRAIN_HOME": str(home), "TFTRAIN_CACHE_DIR": str(lasting_cache_path()), "COLUMNS": "200"}
    process = subprocess.Popen(
        [TFTRAIN, "serve", f"{NAME}@v1", "--port", str(port), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    deadline = time.monotonic() + 900
    while not any("is ready:" in line for line in lines):
        assert process.poll() is None, "".join(lines[-40:])
        assert time.monotonic() < deadline, "".join(lines[-40:])
        time.sleep(0.2)
    return Server(process, port, lines)


@pytest.fixture(scope="module")
def server(saved_model, tmp_path_factory):
    running = started(saved_model, tmp_path_factory.mktemp("serve-home"))
    yield running
    if running.process.poll() is None:
        running.process.terminate()
        running.process.wait(60)


def test_batched_requests_each_get_their_own_answer(saved_model, tmp_path):
    running = started(saved_model, tmp_path / "home", "--batch")
    try:
        features, expected = saved_model.probe()
        answers: dict[int, object] = {}

        def ask(row: int) -> None:
            for _ in range(20):  # enough requests that some meet in one batch
                answers[row] = running.request(
                    "POST", f"/v1/models/{NAME}:predict", {"instances": [features[row].tolist()]}
                )

        threads = [threading.Thread(target=ask, args=(row % 3,)) for row in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for row in range(3):
            status, body = answers[row]
            assert status == 200
            np.testing.assert_allclose(body["predictions"], expected[row : row + 1], atol=1e-5)
    finally:
        running.process.terminate()
        assert running.process.wait(60) == 0


def test_a_model_of_the_newest_release_is_served_by_the_kserve_that_installs_beside_it(saved_model, tmp_path):
    """TensorFlow 2.21 needs protobuf ≥ 6.31, KServe 0.16 < 6: a version recorded as 2.21 gets KServe
    0.21 and TensorFlow 2.21 from its tested set (protobuf from KServe's range), and answers as TensorFlow."""
    running = started(saved_model, tmp_path / "home", tensorflow="2.21.0")
    try:
        features, expected = saved_model.probe()
        status, body = running.request("POST", f"/v1/models/{NAME}:predict", {"instances": features[:2].tolist()})
        assert status == 200, body
        np.testing.assert_allclose(body["predictions"], expected[:2], atol=1e-5)
        status, body = running.request(
            "POST",
            f"/v2/models/{NAME}/infer",
            {
                "inputs": [
                    {"name": INPUT, "shape": [1, features.shape[1]], "datatype": "FP32", "data": features[0].tolist()}
                ]
            },
        )
        assert status == 200, body
        from runner.environments import serving_spec

        python = lasting_cache_path() / "envs" / serving_spec("2.21.0", onnx=False).key / "bin" / "python"
        versions = subprocess.run(
            [
                str(python),
                "-c",
                "from importlib.metadata import version as v; print(v('kserve'), v('tensorflow-cpu'), v('protobuf'))",
            ],
            capture_output=True,
            text=True,
        )
        kserve, tensorflow, protobuf = versions.stdout.split()
        assert (kserve, tensorflow, protobuf[0]) == ("0.21.0", "2.21.0", "6"), versions.stdout + versions.stderr
    finally:
        running.process.terminate()
        assert running.process.wait(60) == 0


def test_the_cli_prints_the_url_and_the_endpoints_once_ready(server):
    text = "".join(server.lines)
    assert f"POST http://127.0.0.1:{server.port}/v1/models/{NAME}:predict" in text
    assert f"/v2/models/{NAME}/infer" in text
    assert "sample prediction matches serving/predictions.npz" in text


def test_tensorflow_serving_rest_predicts_as_tensorflow_does(server, saved_model):
    features, expected = saved_model.probe()
    status, body = server.request("POST", f"/v1/models/{NAME}:predict", {"instances": features.tolist()})
    assert status == 200
    np.testing.assert_allclose(body["predictions"], expected, atol=1e-5)
    status, body = server.request(
        "POST",
        f"/v1/models/{NAME}:predict",
        {"signature_name": "serving_default", "inputs": {INPUT: features.tolist()}},
    )
    assert status == 200
    np.testing.assert_allclose(body["outputs"], expected, atol=1e-5)
    assert server.request("GET", f"/v1/models/{NAME}") == (
        200,
        {
            "model_version_status": [
                {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        },
    )
    status, metadata = server.request("GET", f"/v1/models/{NAME}/metadata")
    assert status == 200 and metadata["model_spec"]["name"] == NAME
    default = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert default["inputs"][INPUT]["dtype"] == "DT_FLOAT"
    assert [dim["size"] for dim in default["inputs"][INPUT]["tensor_shape"]["dim"]] == ["-1", "64"]
    assert list(default["outputs"]) == [OUTPUT]
    assert server.request("GET", "/v1/models/other")[0] == 404


def test_open_inference_protocol(server, saved_model):
    features, expected = saved_model.probe()
    request = {
        "inputs": [
            {"name": INPUT, "datatype": "FP32", "shape": list(features.shape), "data": features.ravel().tolist()}
        ]
    }
    status, body = server.request("POST", f"/v2/models/{NAME}/infer", request)
    assert status == 200
    (output,) = body["outputs"]
    assert (output["name"], output["shape"], output["datatype"]) == (OUTPUT, [3, 10], "FP32")
    np.testing.assert_allclose(np.reshape(output["data"], (3, 10)), expected, atol=1e-5)
    assert server.request("GET", "/v2/health/ready") == (200, {"ready": True})
    status, metadata = server.request("GET", f"/v2/models/{NAME}")
    assert status == 200 and metadata["inputs"] == [{"name": INPUT, "datatype": "FP32", "shape": [-1, 64]}]


@pytest.mark.parametrize(
    ("path", "body", "content_type", "expected"),
    [
        (
            f"/v1/models/{NAME}:predict",
            {"instances": [[1, 2, 3]]},
            "application/json",
            f"input '{INPUT}': shape (1, 3)",
        ),
        (
            f"/v1/models/{NAME}:predict",
            {"instances": [["a"] * 64]},
            "application/json",
            f"input '{INPUT}': the string 'a' is not float32",
        ),
        (
            f"/v1/models/{NAME}:predict",
            {"inputs": {"pixels": [[0] * 64]}},
            "application/json",
            "input 'pixels' is not in signature",
        ),
        (
            f"/v1/models/{NAME}:predict",
            {"instances": [[0] * 64], "signature_name": "nope"},
            "application/json",
            "signature_name 'nope'",
        ),
        (f"/v1/models/{NAME}:predict", "{not json", "application/json", "the body is not JSON"),
        (f"/v1/models/{NAME}:predict", "instances=1", "application/x-www-form-urlencoded", "the body is not JSON"),
        (
            f"/v2/models/{NAME}/infer",
            {"inputs": [{"name": INPUT, "datatype": "FP32", "data": [1]}]},
            "application/json",
            f"input '{INPUT}': shape",
        ),
        (
            f"/v2/models/{NAME}/infer",
            {"inputs": [{"name": INPUT, "datatype": "FP32", "shape": [1, 64], "data": [1, 2]}]},
            "application/json",
            f"input '{INPUT}': 2 values cannot fill shape [1, 64]",
        ),
        (f"/v2/models/{NAME}/infer", {"inputs": []}, "application/json", f"input '{INPUT}' is missing"),
        (f"/v2/models/{NAME}/infer", "nope", "application/json", "the body is not JSON"),
    ],
)
def test_malformed_requests_are_400s_naming_the_input(server, path, body, content_type, expected):
    status, answer = server.request("POST", path, body, content_type)
    assert status == 400, answer
    assert expected in answer["error"]


def test_the_log_has_no_line_per_request_and_no_traceback(server):
    for _ in range(5):
        server.request("POST", f"/v1/models/{NAME}:predict", {"instances": [[0] * 64]})
    server.request("POST", f"/v1/models/{NAME}:predict", {"instances": [[0]]})
    time.sleep(0.5)
    text = "".join(server.lines)
    assert "POST /v1" not in text and "Traceback" not in text


def test_sigterm_finishes_the_request_in_flight_and_exits_0(server):
    """Runs last: it stops the module's server."""
    body = json.dumps({"instances": [[0.5] * 64]}).encode()
    client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    head = (
        f"POST /v1/models/{NAME}:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length:"
        f" {len(body)}\r\n\r\n"
    )
    client.sendall(head.encode() + body[:10])  # the request has begun: the server is waiting for its body
    stalled = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(3)]
    for other in stalled:  # requests whose bodies never come: they hold the drain until its grace ends
        other.sendall(head.encode() + body[:5])
    time.sleep(0.5)
    server.process.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    with pytest.raises(OSError):  # no new connection is taken while draining
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    client.sendall(body[10:])
    answer = client.makefile("rb").read().decode()
    client.close()
    assert answer.startswith("HTTP/1.1 200"), answer
    assert '"predictions"' in answer
    assert server.process.wait(90) == 0, "".join(server.lines[-20:])  # after its grace period (30 s)
    for other in stalled:
        other.close()
    text = "".join(server.lines)
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text[-3000:]
    assert "tftrain-serve: 3 requests still arriving when the server stopped were dropped unanswered" in text


def test_refusals_are_one_line_with_their_exit_code(home, cli, tmp_path, saved_model):
    register_version(home, saved_model)
    (tmp_path / "pickled").mkdir()
    (tmp_path / "pickled" / "model.pkl").write_bytes(b"not tensorflow")
    register_version(home, saved_model, name="pickled", serving=False, source=tmp_path / "pickled")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", f"{NAME}@v1", "--port", str(port))
    assert (done.returncode, done.stderr.strip()) == (
        13,
        f"tftrain: error: port {port} on 127.0.0.1 is in use: choose another with --port",
    )
    port = str(free_port())
    done = cli("serve", "nothing@v3", "--port", port)
    assert (
        done.returncode == 5 and done.stderr.strip().count("\n") == 0 and "nothing@v3 is not registered" in done.stderr
    )
    done = cli("serve", "no-such-run", "--port", port)
    assert done.returncode == 5 and "neither a run nor a registered model" in done.stderr
    done = cli("serve", f"{NAME}@v1", "--runtime", "onnx", "--port", port)
    assert (done.returncode, done.stderr.strip().count("\n")) == (26, 0) and "has no model.onnx" in done.stderr
    done = cli("serve", "pickled@latest", "--port", port)
    assert (done.returncode, done.stderr.strip().count("\n")) == (
        26,
        0,
    ) and "pickled@v1 has no loadable model" in done.stderr
