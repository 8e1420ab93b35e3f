"""`tftrain serve` of a scoring script, for real, against what slow clients and the script itself
can do to the server: one idle connection and a few hundred slow-loris ones held open while a normal
client is answered; a run() that forks daemons (plain and setsid) and tftrain SIGKILLed; a healthy
start with no traceback; an init() that raises or ends its process, and a run() that ends its
process — one line each, promptly, ServingError's exit code. The scripts need no model: each
version registers a stand-in directory, in the scoring environment test_scoring.py uses."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import TFTRAIN
from serving_models import lasting_cache_path

from runner.errors import ServingError

READY_SECONDS = 900  # the scoring environment may be built on first use
ANSWER_SECONDS = 5  # what a normal client may wait while others stall
GONE_SECONDS = 10
SLOW_CLIENTS = 300
TENSORFLOW = "2.18.1"  # with the packages below: test_scoring.py's environment (examples/azure-keras-scoring's)
PACKAGES = ["numpy"]

ECHO = (
    "import time\n\n\ndef init():\n    pass\n\n\ndef run(raw_data):\n    if 'sleep' in raw_data:\n       "
    " time.sleep(30)\n    return [len(raw_data)]\n"
)
WORKER_TIMEOUT = 8  # Azure's variable, 300 s by default: shorter, for the request that runs past it
FORKS = """import os, time


def init():
    pass


def run(raw_data):
    if os.fork() == 0:  # a daemon: double fork, its own session
        os.setsid()
        if os.fork() == 0:
            open({pids!r} + "/daemon", "w").write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    child = os.fork()
    if child == 0:  # a plain child
        time.sleep(600)
    open({pids!r} + "/child", "w").write(str(child))
    return [1]
"""


def register(home: Path, name: str, script: str) -> None:
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    files = home / "files" / name
    (files / "model").mkdir(parents=True)
    (files / "model" / "weights.txt").write_text("a stand-in: the scripts load no model\n")
    (files / "score.py").write_text(script)
    serving = {
        "tensorflow": TENSORFLOW,
        "scoring": {"script": "score.py", "packages": PACKAGES, "auth": False, "layout": "directory"},
    }
    (files / "serving.json").write_text(json.dumps(serving))
    with Store(home) as store:
        Registry(store).register(
            name,
            files / "model",
            None,
            {"framework_version": TENSORFLOW, "serving": serving},
            {"scoring/score.py": files / "score.py", "serving/serving.json": files / "serving.json"},
        )


class Serve:
    """`tftrain serve NAME@v1 --port 0`, its output collected."""

    def __init__(
        self, tmp_path: Path, script: str, name: str = "scored", env_extra: dict[str, str] | None = None
    ) -> None:
        self.home = tmp_path / "home"
        register(self.home, name, script)
        env = {
            **os.environ,
            "TFTRAIN_HOME": str(self.home),
            "TFTRAIN_CACHE_DIR": str(lasting_cache_path()),
            "COLUMNS": "200",
            **(env_extra or {}),
        }
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [TFTRAIN, "serve", f"{name}@v1", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(self.process.stderr), daemon=True).start()

    @property
    def output(self) -> str:
        return "".join(self.lines) + "".join(self.errors)

    def ready(self) -> "Serve":
        deadline = time.monotonic() + READY_SECONDS
        while not any("is ready:" in line for line in self.lines):
            assert self.process.poll() is None and time.monotonic() < deadline, self.output[-4000:]
            time.sleep(0.2)
        self.port = next(int(line.split()[2]) for line in self.lines if line.startswith("tftrain-serve: port "))
        return self

    def ended(self, seconds: float = 120) -> int:
        try:
            code = self.process.wait(seconds)
        finally:
            self.stop()  # a server that does not end is not left behind
        time.sleep(0.2)  # the readers' last lines
        return code

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float = ANSWER_SECONDS
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def server_pids(self) -> list[int]:
        """Every process below tftrain serve (the server, gunicorn, its worker, what the script forked)."""
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        below, todo = [], [self.process.pid]
        while todo:
            parent = todo.pop()
            children = [pid for pid, ppid in parents.items() if ppid == parent]
            below += children
            todo += children
        return below


def answered_meanwhile(served: Serve) -> None:
    """A normal client's GET / and POST /score, each answered within ANSWER_SECONDS."""
    for method, path, body, expected in (("GET", "/", None, b"Healthy"), ("POST", "/score", b'{"data": [1]}', b"[13]")):
        began = time.monotonic()
        status, answer = served.request(method, path, body)
        assert (status, answer) == (200, expected) and time.monotonic() - began < ANSWER_SECONDS


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    served = Serve(
        tmp_path_factory.mktemp("scoring-echo"), ECHO, env_extra={"WORKER_TIMEOUT": str(WORKER_TIMEOUT)}
    ).ready()
    yield served
    served.stop()


def test_one_idle_connection_does_not_stop_the_server(echo):
    idle = socket.create_connection(("127.0.0.1", echo.port))  # sends nothing, not even a key
    try:
        answered_meanwhile(echo)
    finally:
        idle.close()


def test_hundreds_of_slow_clients_do_not_stop_the_server(echo):
    """Slow loris, bounded: SLOW_CLIENTS connections on loopback, each stalled in its headers or
    its body, held open while a normal client is answered; all closed at the end."""
    held: list[socket.socket] = []
    stalls = [
        b"",
        b"POST /score HTTP/1.1\r\nHost: x\r\n",
        b'POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"data"',
    ]
    try:
        for number in range(SLOW_CLIENTS):
            client = socket.create_connection(("127.0.0.1", echo.port), timeout=10)
            client.sendall(stalls[number % len(stalls)])
            held.append(client)
        for _ in range(3):
            answered_meanwhile(echo)
        time.sleep(1)
        for client in held[::10]:  # a trickle: a byte more from some
            client.sendall(b"x")
        answered_meanwhile(echo)
    finally:
        for client in held:
            client.close()
    assert "Traceback" not in echo.output


def test_a_healthy_start_prints_no_traceback(echo):
    assert echo.request("POST", "/score", b"{}")[0] == 200
    assert "Traceback" not in echo.output and "NotADirectoryError" not in echo.output, echo.output[-3000:]


def test_liveness_answers_while_score_is_busy_and_a_request_past_the_timeout_gets_a_new_worker(echo):
    slow: list[object] = []

    def call() -> None:
        try:
            slow.append(echo.request("POST", "/score", b'"sleep"', timeout=90)[0])
        except (OSError, http.client.HTTPException) as exc:
            slow.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(1)
    began = time.monotonic()
    assert echo.request("GET", "/") == (200, b"Healthy") and time.monotonic() - began < 2  # not queued behind run()
    caller.join(90)
    assert slow and slow[0] != 200
    deadline = time.monotonic() + 60
    while echo.request("POST", "/score", b"{}", timeout=60) != (200, b"[2]"):  # a new worker ran init()
        assert time.monotonic() < deadline and echo.process.poll() is None
        time.sleep(0.5)
    assert f"ran past WORKER_TIMEOUT ({WORKER_TIMEOUT} s)" in echo.output and "Traceback" not in echo.output, (
        echo.output[-3000:]
    )


def test_nothing_of_the_server_outlives_tftrain_killed(tmp_path):
    """run() forks a plain child and a setsid daemon; SIGKILL of tftrain serve takes them, the
    server and its port with it."""
    pids = tmp_path / "pids"
    pids.mkdir()
    served = Serve(tmp_path, FORKS.format(pids=str(pids))).ready()
    try:
        assert served.request("POST", "/score", b"{}") == (200, b"[1]")
        deadline = time.monotonic() + GONE_SECONDS
        while not (pids / "daemon").is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        forked = [int((pids / name).read_text()) for name in ("daemon", "child")]
        server = served.server_pids()  # the daemon's parent is gone: it is the server's now
        assert len(server) >= 5 and all(Path(f"/proc/{pid}").exists() for pid in forked)
        served.process.kill()
        served.process.wait(10)
        deadline = time.monotonic() + GONE_SECONDS
        while any(Path(f"/proc/{pid}").exists() for pid in forked + server) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in forked + server if Path(f"/proc/{pid}").exists()]
        assert left == [], f"outlived tftrain serve: {left}"
        with socket.socket() as probe:  # the port is free: the next `tftrain serve --port N` gets it
            probe.bind(("127.0.0.1", served.port))
    finally:
        served.stop()
        for name in ("daemon", "child"):
            if (pids / name).is_file():
                try:
                    os.kill(int((pids / name).read_text()), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_an_init_that_raises_is_one_line_and_no_traceback(tmp_path):
    served = Serve(
        tmp_path, "def init():\n    raise OSError('disk gone')\n\n\ndef run(raw_data):\n    return raw_data\n"
    )
    assert served.ended() == ServingError.exit_code
    assert "Traceback" not in served.output, served.output[-3000:]
    assert [line for line in served.output.splitlines() if "error" in line.lower()] == [
        "tftrain-serve: error: scoring script score.py: init() raised OSError: disk gone (score.py:2)",
        (
            "tftrain: error: the model server stopped before it was ready (exit 3): tftrain-serve: error: scoring"
            " script score.py: init() raised OSError: disk gone (score.py:2)"
        ),
    ], served.output[-3000:]


def test_an_init_that_ends_its_process_stops_the_server_at_once_in_one_line(tmp_path):
    served = Serve(
        tmp_path, "import os\n\n\ndef init():\n    os._exit(7)\n\n\ndef run(raw_data):\n    return raw_data\n"
    )
    assert served.ended(120) == ServingError.exit_code  # not the 900 s of waiting for a server that re-boots forever
    assert "Traceback" not in served.output and served.output.count("Booting worker") <= 1, served.output[-3000:]
    (line,) = served.errors
    assert (
        line.startswith("tftrain: error: the model server stopped before it was ready (exit 3): ") and "exit 7" in line
    )
    assert "before init() finished" in line


def test_a_run_that_ends_its_process_stops_the_server_saying_why(tmp_path):
    served = Serve(tmp_path, "import os\n\n\ndef init():\n    pass\n\n\ndef run(raw_data):\n    os._exit(3)\n").ready()
    try:
        status, _ = served.request("POST", "/score", b"{}")
    except (OSError, http.client.HTTPException):
        status = None
    assert status in (None, 502)
    assert served.ended(60) == ServingError.exit_code
    (line,) = served.errors
    assert line.startswith(
        "tftrain: error: the model server stopped (exit 3): tftrain-serve: error: scoring script score.py: its worker"
    )
    assert "(exit 3) while serving" in line and "Traceback" not in served.output
