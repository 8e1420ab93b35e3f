"""tftrain serve REF [--host H] [--port N] [--runtime tensorflow|onnx]: a registered model over HTTP.

The version is copied out (checksums verified) into a temporary directory, the serving
environment is built or reused, and the model server (runner.serving.server, KServe) runs in it
as a child: its log lines are streamed here, SIGINT, SIGTERM and SIGHUP stop it cleanly (it drains
and exits 0), and tftrain exits with its status. The URL is printed once the server answers ready
(with --port 0, on the port the server got). The temporary copy's directory is made first, with a
lifeline to tftrain (runner.serving.supervision): if tftrain dies, SIGKILL included, the server
stops and a watcher removes the copy. `--auth-token-env NAME`: the key in $NAME reaches the server in its
environment, never in argv, and is masked in everything printed. `--verify-key FILE` (or, keyless,
`--verify-identity ID --verify-issuer URL`): the copy is checked against a copy of the version's
model.sig (a release's: its asset) before anything of it is read, built or started; a version
that does not verify is SignatureError, exit 29, and nothing starts.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import http.client
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runner.cli.verifying import add_verify_arguments, trusted, verify_copy
from runner.errors import PlanError, ServingError, UsageError
from runner.history.signing import SIGNATURE
from runner.paths import tftrain_home
from runner.serving import guard, supervision
from runner.serving.layout import Runtime
from runner.serving.refs import COPY_PREFIX, RELEASE_PREFIX, Served, checked_out
from runner.serving.scoring.script import packages_of, recorded

READY_TIMEOUT_SECONDS = 900  # TensorFlow's import plus a large model's load, on a slow machine
POLL_SECONDS = 0.2
MAX_PORT = 65535
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RELAY_BYTES = 1 << 20
RELAY_PIPE_BYTES = 1 << 20
RELAY_PAUSE_SECONDS = 0.05


def add_arguments(parser) -> None:
    parser.add_argument("ref", help="NAME@vN, NAME@latest, a run id, or release:NAME@vN|@latest (from GitHub Releases)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=8080, help="default 8080; 0: a free port (printed)")
    parser.add_argument("--runtime", choices=[r.value for r in Runtime], default=Runtime.TENSORFLOW.value,
                        help="TensorFlow (default) or ONNX Runtime on the version's model.onnx")
    parser.add_argument("--batch", action="store_true",
                        help=":predict requests that arrive while the model is busy run as one call (for models whose rows are independent)")
    parser.add_argument("--auth-token-env", metavar="NAME",
                        help="require 'Authorization: Bearer KEY' on every route but health, KEY being $NAME's value")
    parser.add_argument("--max-body-bytes", type=int, default=guard.DEFAULT_MAX_BODY_BYTES,
                        help=f"larger request bodies are answered 413 (default {guard.DEFAULT_MAX_BODY_BYTES})")
    parser.add_argument("--openapi", action="store_true", help="serve /openapi.json and /docs too (behind the key, if any)")
    add_verify_arguments(parser, "serve")


def run(args, logger) -> int:
    trusted_by = trusted(args)  # the key is read and checked before anything else
    runtime = Runtime(args.runtime)
    token = check_options(args, logger)
    check_port_free(args.host, args.port)
    # the copy's directory and its lifeline first: from here on, whatever ends tftrain, the copy goes
    with tempfile.TemporaryDirectory(prefix=COPY_PREFIX) as workspace, supervision.lifeline(Path(workspace)) as lifeline_fd, \
            _github_errors(args.ref), checked_out(args.ref, logger, lambda: _github_repo(args), Path(workspace), tftrain_home(),
                                                  signature=(signature := Path(workspace) / SIGNATURE) if trusted_by else None) as served:
        from runner.environments import link_runner, prepare_serving_env, serving_spec

        if trusted_by is not None:  # before anything of the version is read, built or started
            verify_copy(served.directory.root, signature, trusted_by, served.label, logger)

        scoring = recorded(served.directory.root)
        if scoring is not None:  # Azure's entry script on Azure's server (runner.serving.scoring.server)
            return _serve_scoring(args, served, scoring, token, lifeline_fd, logger)
        check_servable(served, runtime)

        env = prepare_serving_env(serving_spec(served.framework_version, onnx=runtime is Runtime.ONNX), logger)
        check_port_free(args.host, args.port)  # again: building the environment can take minutes
        argv = [
            env.python, "-m", "runner.serving.server", "--model-dir", str(served.directory.root), "--name", served.name,
            "--runtime", runtime.value, "--host", args.host, "--port", str(args.port),
        ]
        if served.version is not None:
            argv += ["--version", str(served.version)]
        argv += ["--max-body-bytes", str(args.max_body_bytes), "--lifeline-fd", str(lifeline_fd)]
        argv += [flag for flag, on in (("--batch", args.batch), ("--openapi", args.openapi)) if on]
        pythonpath = link_runner(served.directory.root.parent / "pythonpath")
        logger.info(f"serving {served.label} ({runtime.value}) in {env.python}")
        return _supervise(argv, pythonpath, served, args, token, lifeline_fd, logger)


def _serve_scoring(args, served: Served, scoring: dict, token: str | None, lifeline_fd: int, logger) -> int:
    """The version's scoring script on azmlinfsrv, in a cached environment of the model's TensorFlow
    set, the server and the script's packages; `auth: true` needs the key."""
    from runner.environments import link_runner, prepare_serving_env, scoring_spec

    refused = [flag for flag, used in (("--runtime onnx", args.runtime != Runtime.TENSORFLOW.value), ("--batch", args.batch),
                                       ("--openapi", args.openapi)) if used]
    if refused:
        raise UsageError(f"{served.label} is served by its scoring script ({scoring['script']}): {', '.join(refused)} do not apply "
                         "(azmlinfsrv serves /score and /swagger.json)")
    if scoring.get("auth") and token is None:
        raise UsageError(f"{served.label} was registered with model.serving.auth: true: give the key with --auth-token-env NAME")
    try:
        packages = packages_of(scoring)
    except ValueError as exc:
        raise ServingError(f"{served.label}: {exc}") from None
    env = prepare_serving_env(scoring_spec(served.framework_version, packages), logger)
    check_port_free(args.host, args.port)
    argv = [
        env.python, "-m", "runner.serving.scoring.server", "--model-dir", str(served.directory.root), "--name", served.name,
        "--host", args.host, "--port", str(args.port), "--max-body-bytes", str(args.max_body_bytes), "--lifeline-fd", str(lifeline_fd),
    ]
    if served.version is not None:
        argv += ["--version", str(served.version)]
    pythonpath = link_runner(served.directory.root.parent / "pythonpath")
    logger.info(f"serving {served.label}: scoring script {scoring['script']} on azmlinfsrv in {env.python}")
    return _supervise(argv, pythonpath, served, args, token, lifeline_fd, logger, SCORING)


def check_options(args, logger) -> str | None:
    """UsageError (one line, exit 2) for a port or limit out of range, or a key that is not there;
    the key, masked from here on, when --auth-token-env names one."""
    if not 0 <= args.port <= MAX_PORT:
        raise UsageError(f"--port {args.port}: a port is 0 to {MAX_PORT} (0: a free one)")
    if args.max_body_bytes < 1:
        raise UsageError(f"--max-body-bytes {args.max_body_bytes}: give a number of bytes ≥ 1")
    if args.auth_token_env is None:
        return None
    token = os.environ.get(args.auth_token_env)
    if token is None:
        raise UsageError(f"--auth-token-env {args.auth_token_env}: ${args.auth_token_env} is not set")
    logger.mask(token)
    try:
        guard.check_token(token, f"${args.auth_token_env}")
    except ValueError as exc:
        raise UsageError(f"--auth-token-env {args.auth_token_env}: {exc}") from None
    return token


def check_port_free(host: str, port: int) -> None:
    """PlanError naming the port when something listens there (the server would only find out
    after building its environment and loading the model)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PlanError(f"port {port} on {host} is in use: choose another with --port") from None
            raise PlanError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def check_servable(served: Served, runtime: Runtime) -> None:
    if runtime is Runtime.ONNX and not served.directory.onnx.is_file():
        raise ServingError(f"{served.label} has no model.onnx: serve it with --runtime tensorflow, or register it with ONNX export on")
    if runtime is Runtime.TENSORFLOW and served.directory.located() is None:
        raise ServingError(f"{served.label} has no loadable model: its model/ holds no SavedModel directory, .keras or .h5 file")


def base_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}"


def endpoints(host: str, port: int, name: str) -> list[str]:
    base = base_url(host, port)
    return [
        f"POST {base}/v1/models/{name}:predict  (TensorFlow Serving REST: instances or inputs)",
        f"GET  {base}/v1/models/{name}  and  {base}/v1/models/{name}/metadata",
        f"POST {base}/v2/models/{name}/infer  (Open Inference Protocol)",
        f"GET  {base}/v2/models/{name}  and  {base}/v2/health/ready",
    ]


@dataclass(frozen=True)
class Readiness:
    """How `tftrain serve` knows the server is up, and what it then prints."""

    path: str
    lines: Callable[[str, int, str], list[str]]
    keyed: str  # which routes the key guards (with the verb), for the ready message


def scoring_endpoints(host: str, port: int, name: str) -> list[str]:
    base = base_url(host, port)
    return [f"POST {base}/score  (Azure's scoring contract: the script's run(raw_data))", f"GET  {base}/  (liveness)  and  {base}/swagger.json"]


KSERVE = Readiness("/v2/health/ready", endpoints, "every route but health (/, /v2/health/*, /v1/models/{name}) needs")
SCORING = Readiness("/", scoring_endpoints, "/score and /swagger.json need")


def _supervise(argv: list[str], pythonpath, served: Served, args, token: str | None, lifeline_fd: int, logger,
               ready: Readiness = KSERVE) -> int:
    from runner.environments import server_env

    env = server_env(pythonpath)
    env.pop(guard.TOKEN_VARIABLE, None)  # the server is open unless --auth-token-env asks otherwise
    if token is not None:
        env.pop(args.auth_token_env, None)  # one copy of the key in its environment, under the name it reads
        env[guard.TOKEN_VARIABLE] = token
    # its own session: a terminal's Ctrl-C reaches the server once, through us, not twice
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True, pass_fds=(lifeline_fd,),
    )
    received: list[int] = []

    def forward(signum, frame) -> None:  # SIGHUP too: a closed terminal stops the server cleanly
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    tail: list[str] = []
    port = ListeningPort(args.port)
    pump = threading.Thread(target=_pump, args=(process, logger, tail, port), daemon=True)
    pump.start()
    try:
        if _wait_ready(process, args.host, port, ready.path):
            logger.info(f"{served.label} is ready:", style="bold green")
            for line in ready.lines(args.host, port.value, served.name):
                logger.text(f"  {line}")
            if token is not None:
                logger.text(f"  {ready.keyed.format(name=served.name)} 'Authorization: Bearer ${args.auth_token_env}'")
        elif not received:
            pump.join(timeout=5)
            raise ServingError(f"the model server stopped before it was ready (exit {process.returncode}): {_told(tail)}")
        code = process.wait()
        pump.join(timeout=5)
        if code != 0 and not received:  # it ended on its own (a scoring script's worker that ended, a crash): say why
            raise ServingError(f"the model server stopped (exit {code if code >= 0 else signal.Signals(-code).name}): {_told(tail)}")
    finally:
        if process.poll() is None:  # tftrain itself failing: never leave the server behind
            process.terminate()
            process.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever the server left in its process group
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


def _told(tail: list[str]) -> str:
    """The server's own last error line (before gunicorn's), else its last line."""
    told = [line for line in tail if line.startswith("tftrain-serve: error:")]
    return (told or [line for line in tail if line.strip()] or ["no output"])[-1].strip()


class ListeningPort:
    """The server's port: the one asked for, or (--port 0) the one its first line names."""

    def __init__(self, asked: int) -> None:
        self.value = asked
        self.known = threading.Event()
        if asked:
            self.known.set()

    def read(self, line: str) -> None:
        got = supervision.port_from_line(line)
        if got is not None and not self.known.is_set():
            self.value = got
            self.known.set()


def _pump(process: subprocess.Popen, logger, tail: list[str], port: ListeningPort) -> None:
    """The server's output, relayed whole lines at a time, gathered for RELAY_PAUSE_SECONDS: one
    wake-up and one write for all the lines that came meanwhile (a scoring server logs two lines
    per request), not one per line."""
    assert process.stdout is not None
    fd, pending = process.stdout.fileno(), b""
    with contextlib.suppress(OSError, AttributeError):  # Linux: room for what the server writes while this one waits
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, RELAY_PIPE_BYTES)
    while True:
        if pending or port.known.is_set():
            time.sleep(RELAY_PAUSE_SECONDS)  # let the lines gather: one wake-up and one write for many
        data = os.read(fd, RELAY_BYTES)
        pending += data
        whole, newline, rest = pending.rpartition(b"\n")
        if not data:
            whole, rest = pending, b""
        elif not newline:
            if len(pending) < RELAY_BYTES:
                continue
            whole, rest = pending, b""  # a line longer than a read: relayed in pieces
        pending = rest
        if whole:
            text = whole.decode("utf-8", "replace")
            lines = text.split("\n")
            tail[:] = [*tail, *lines[-20:]][-20:]
            if not port.known.is_set():
                for line in lines:
                    port.read(line)
            logger.text(text)
        if not data:
            return


def _wait_ready(process: subprocess.Popen, host: str, port: ListeningPort, path: str = KSERVE.path) -> bool:
    """True once `path` (/v2/health/ready; a scoring server's /) answers 200; False when the server exits first."""
    target = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while process.poll() is None:
        if time.monotonic() > deadline:
            raise ServingError(f"the model server did not become ready in {READY_TIMEOUT_SECONDS} s")
        if not port.known.wait(POLL_SECONDS):
            continue
        connection = http.client.HTTPConnection(target, port.value, timeout=2)
        try:
            connection.request("GET", path)
            if connection.getresponse().status == 200:
                return True
        except OSError:
            pass
        finally:
            connection.close()
        time.sleep(POLL_SECONDS)
    return False


def _github_errors(ref: str):
    if not ref.startswith(RELEASE_PREFIX):
        return contextlib.nullcontext()
    from runner.github import workflow

    return workflow.github_errors()


def _github_repo(args):
    from runner.github import workflow
    from runner.settings import resolve

    settings = resolve(os.environ, args)
    return workflow.client(settings.github).get_repo(settings.github.repository), settings
