"""A real `tftrain serve` under attack, over raw sockets and http.client with timeouts: management
routes, the bearer token, oversized bodies (declared and chunked), values the model must not be
fed (both protocols), `--port 0`, and the server's end when tftrain is killed (SIGKILL) or hung up
on (SIGHUP). Two served models for the whole file: the first (with a key) ends killed, the second
hung up on."""

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
from pathlib import Path

import pytest
import serving_models
from conftest import TFTRAIN
from hostile import assert_no_traceback, assert_refused, files_containing, nothing_written_outside
from serving_models import INPUT, NAME, WIDTH, lasting_cache_path, register_version

from runner.errors import UsageError

saved_model = serving_models.saved_model  # the session fixture, visible to this module's tests

KEY = "tftrain-test-Key_9c1d7e"
KEY_VARIABLE = "TFTRAIN_TEST_SERVING_KEY"
LIMIT = 1_000_000  # --max-body-bytes: small, so that a chunked body passes it quickly
READY_SECONDS = 900  # the serving environment may be built on first use
GONE_SECONDS = 15
ROW = [0.5] * WIDTH


@dataclass
class Served:
    process: subprocess.Popen
    lines: list[str]
    port: int
    tmp: Path  # TMPDIR of tftrain serve: where its temporary copy lives
    work: Path  # its working directory

    def request(self, method: str, path: str, body=None, key: str | None = KEY, timeout: float = 30):
        """(status, JSON answer) of one request; `key` None sends no Authorization header."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"}
            if key is not None:
                headers["Authorization"] = f"Bearer {key}"
            data = body if body is None or isinstance(body, bytes) else json.dumps(body)
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()

    def server_pid(self) -> int:
        """The model server: the child of `tftrain serve`."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if (
                        int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == self.process.pid
                        and b"runner.serving.server" in (entry / "cmdline").read_bytes()
                    ):  # not the lifeline's watcher
                        return int(entry.name)
                except (OSError, IndexError, ValueError):
                    continue
        raise AssertionError("no model server under tftrain serve")


def start(saved_model, root: Path, *options: str, env_extra: dict[str, str] | None = None) -> Served:
    home, tmp, work = root / "home", root / "tmp", root / "work"
    for directory in (tmp, work):
        directory.mkdir(parents=True)
    register_version(home, saved_model)
    env = {
        **os.environ,
        "TFTRAIN_HOME": str(home),
        "TFTRAIN_CACHE_DIR": str(lasting_cache_path()),
        "TMPDIR": str(tmp),
        "COLUMNS": "200",
        **(env_extra or {}),
    }
    process = subprocess.Popen(
        [TFTRAIN, "serve", f"{NAME}@v1", "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=work,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    deadline = time.monotonic() + READY_SECONDS
    while not any("is ready:" in line for line in lines):
        assert process.poll() is None, "".join(lines[-40:])
        assert time.monotonic() < deadline, "".join(lines[-40:])
        time.sleep(0.2)
    port = next(int(line.split()[2]) for line in lines if line.startswith("tftrain-serve: port "))
    return Served(process, lines, port, tmp, work)


@pytest.fixture(scope="module")
def served(saved_model, tmp_path_factory):
    running = start(
        saved_model,
        tmp_path_factory.mktemp("hostile-serve"),
        "--auth-token-env",
        KEY_VARIABLE,
        "--max-body-bytes",
        str(LIMIT),
        env_extra={KEY_VARIABLE: KEY},
    )
    yield running
    if running.process.poll() is None:
        running.process.terminate()
        running.process.wait(60)


def test_port_0_starts_on_a_free_port_and_says_which(served):
    text = "".join(served.lines)
    assert served.port > 0 and f"POST http://127.0.0.1:{served.port}/v1/models/{NAME}:predict" in text
    assert served.request("GET", "/v2/health/ready", key=None) == (200, {"ready": True})


@pytest.mark.parametrize(
    "path", [f"/v2/repository/models/{NAME}/unload", f"/v2/repository/models/{NAME}/load", "/v2/repository/index"]
)
def test_the_model_repository_cannot_unload_the_model(served, path):
    for key in (None, KEY):
        assert served.request("POST", path, {}, key=key)[0] == 404
    assert served.request("POST", f"/v1/models/{NAME}:predict", {"instances": [ROW]})[0] == 200
    assert served.request("GET", f"/v2/models/{NAME}/ready", key=None)[0] == 200


def test_no_openapi_docs_or_metrics_unless_asked(served):
    for path in ("/openapi.json", "/docs", "/redoc", "/metrics"):
        assert served.request("GET", path)[0] == 404, path


def test_every_route_but_health_needs_the_key(served):
    for path in ("/", "/v2/health/live", "/v2/health/ready", f"/v1/models/{NAME}", f"/v2/models/{NAME}/ready"):
        assert served.request("GET", path, key=None)[0] == 200, path
    infer = {"inputs": [{"name": INPUT, "datatype": "FP32", "shape": [1, WIDTH], "data": ROW}]}
    calls = [
        ("POST", f"/v1/models/{NAME}:predict", {"instances": [ROW]}),
        ("POST", f"/v2/models/{NAME}/infer", infer),
        ("GET", f"/v1/models/{NAME}/metadata", None),
        ("GET", f"/v2/models/{NAME}", None),
        ("GET", "/v2", None),
    ]
    for method, path, body in calls:
        for key in (None, "wrong", KEY + "x", ""):
            status, answer = served.request(method, path, body, key=key)
            assert status == 401 and KEY not in json.dumps(answer), (path, key)
        assert served.request(method, path, body)[0] == 200, path


def _status_line(client: socket.socket) -> str:
    data = b""
    while b"\r\n" not in data:
        chunk = client.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def test_a_declared_200_mb_body_is_413_before_it_is_sent(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as client:
        client.sendall(
            f"POST /v1/models/{NAME}:predict HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n".encode()
        )
        assert _status_line(client) == "HTTP/1.1 413 Request Entity Too Large"
    assert served.request("GET", "/v2/health/ready", key=None)[0] == 200


def test_a_chunked_body_is_413_once_it_passes_the_limit(served):
    answer: list[str] = []
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as client:
        client.sendall(
            f"POST /v2/models/{NAME}/infer HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        reader = threading.Thread(target=lambda: answer.append(_status_line(client)), daemon=True)
        reader.start()
        piece = b"[" + b"0.5," * 16383 + b"\n"
        try:
            for _ in range(200):  # 13 MB at most: far past the limit
                if not reader.is_alive():
                    break
                client.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        except OSError:  # answered and closed: the rest is not read
            pass
        reader.join(10)
    assert answer == ["HTTP/1.1 413 Request Entity Too Large"]
    assert served.request("POST", f"/v1/models/{NAME}:predict", {"instances": [ROW]})[0] == 200


def _v1(value) -> bytes:
    return json.dumps({"instances": [ROW[:-1] + [value]]}).encode().replace(b'"@', b"").replace(b'@"', b"")


def _v2(value=0.5, shape=(1, WIDTH), twice=False) -> bytes:
    tensor = {"name": INPUT, "datatype": "FP32", "shape": list(shape), "data": ROW[:-1] + [value]}
    return (
        json.dumps({"inputs": [tensor, tensor] if twice else [tensor]}).encode().replace(b'"@', b"").replace(b'@"', b"")
    )


COERCED = [
    (None, "null is not float32"),
    ("1", "the string '1' is not float32"),
    (True, "true is not float32"),
    (False, "false is not float32"),
    (3.5e38, "3.5e+38 overflows float32"),
    ("@NaN@", "NaN, which is not a JSON number"),
    ("@Infinity@", "Infinity, which is not a JSON number"),
    ("@1e999@", "inf is not a finite number"),
]


@pytest.mark.parametrize(("value", "reason"), COERCED)
def test_values_the_model_must_not_be_fed_are_400_on_both_protocols(served, value, reason):
    for path, body in ((f"/v1/models/{NAME}:predict", _v1(value)), (f"/v2/models/{NAME}/infer", _v2(value))):
        status, answer = served.request("POST", path, body)
        assert status == 400 and reason in answer["error"], (path, answer)


def test_v2_shapes_and_names_are_checked(served):
    for body, reason in (
        (_v2(shape=(-1, WIDTH)), "shape must be a list of sizes ≥ 0"),
        (_v2(twice=True), f"input '{INPUT}' is given twice"),
    ):
        status, answer = served.request("POST", f"/v2/models/{NAME}/infer", body)
        assert status == 400 and reason in answer["error"], answer
    duplicated = b'{"instances": [[0.5]], "instances": [%s]}' % json.dumps(ROW).encode()
    status, answer = served.request("POST", f"/v1/models/{NAME}:predict", duplicated)
    assert status == 400 and "'instances' twice" in answer["error"]


def _binary(tensor: dict, raw: bytes = b"") -> tuple[bytes, dict, bytes]:
    """A binary Open Inference Protocol request (a JSON part, then raw tensor bytes), as tritonclient sends one."""
    head = json.dumps({"inputs": [tensor]}).encode()
    return head, {"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/octet-stream"}, raw


def test_binary_tensors_meet_the_same_checks(served):
    import numpy as np

    row = np.full((1, WIDTH), 0.5, np.float32)
    spec = {"name": INPUT, "datatype": "FP32", "shape": [1, WIDTH], "parameters": {"binary_data_size": row.nbytes}}
    poisoned = row.copy()
    poisoned[0, 3] = np.nan
    json_tensor = {"name": INPUT, "datatype": "FP32", "shape": [1, WIDTH], "data": ROW[:-1] + [None]}
    for (head, headers, raw), expected in (
        (_binary(spec, row.tobytes()), (200, None)),
        (_binary(spec, poisoned.tobytes()), (400, "nan is not a finite number")),
        (_binary(json_tensor), (400, "null is not float32")),
    ):  # JSON under the binary header
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        try:
            connection.request(
                "POST", f"/v2/models/{NAME}/infer", head + raw, {**headers, "Authorization": f"Bearer {KEY}"}
            )
            response = connection.getresponse()
            answer = json.loads(response.read())
        finally:
            connection.close()
        assert response.status == expected[0], answer
        assert expected[1] is None or expected[1] in answer["error"], answer


def test_bad_ports_are_one_line_exit_2(cli, tmp_path):
    for port in ("99999", "-1", "99999999999999999999999"):
        assert_refused(cli("serve", f"{NAME}@v1", "--port", port), UsageError, f"--port {port}")


def test_the_key_is_never_printed_nor_stored_nor_in_argv(served):
    server = served.server_pid()
    argv = Path(f"/proc/{server}/cmdline").read_bytes() + Path(f"/proc/{served.process.pid}/cmdline").read_bytes()
    assert KEY.encode() not in argv
    assert KEY not in "".join(served.lines)
    assert files_containing(served.tmp, [KEY.encode()]) == []


def test_sigkill_of_tftrain_serve_takes_the_server_and_its_copy_with_it(served):
    """Runs last of the keyed server's tests: it kills it."""
    server = served.server_pid()
    assert any(served.tmp.iterdir())  # the version's temporary copy
    with nothing_written_outside(served.work):
        served.process.kill()
        served.process.wait(10)
        deadline = time.monotonic() + GONE_SECONDS
        while (Path(f"/proc/{server}").exists() or any(served.tmp.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert not Path(f"/proc/{server}").exists(), "the model server outlived tftrain serve"
    assert list(served.tmp.iterdir()) == [], "the temporary copy stayed"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=2).close()
    assert "Traceback" not in "".join(served.lines)


WATCHED = """
import sys, time
from pathlib import Path
from runner.serving.supervision import lifeline
copy = Path(sys.argv[1])
with lifeline(copy):
    (copy / "version").mkdir()
    print("holding", flush=True)
    time.sleep(120)
"""


def test_the_copy_goes_when_tftrain_is_killed_before_any_server_exists(tmp_path):
    """The watcher alone: tftrain killed while it copies the version or builds the environment."""
    import sys

    copy = tmp_path / "tftrain-serve-x"
    copy.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", WATCHED, str(copy)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n" and (copy / "version").is_dir()
    finally:
        holder.kill()
        holder.wait(10)
    deadline = time.monotonic() + GONE_SECONDS
    while copy.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not copy.exists()


def test_sighup_stops_tftrain_serve_cleanly(saved_model, tmp_path):
    running = start(saved_model, tmp_path)
    server = running.server_pid()
    assert running.request("POST", f"/v1/models/{NAME}:predict", {"instances": [ROW]}, key=None)[0] == 200
    running.process.send_signal(signal.SIGHUP)
    assert running.process.wait(60) == 0, "".join(running.lines[-20:])
    deadline = time.monotonic() + GONE_SECONDS
    while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{server}").exists() and list(running.tmp.iterdir()) == []
    assert_no_traceback(subprocess.CompletedProcess([], 0, "".join(running.lines), ""))
