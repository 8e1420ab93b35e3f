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
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from runner.cli.releases import github_repo, release_errors
from runner.cli.verifying import add_verify_arguments, trusted
from runner.errors import PlanError, ServingError, UsageError
from runner.history.signing import SIGNATURE, verify_copy
from runner.paths import tftrain_home
from runner.serving import guard, supervision
from runner.serving.launch import (
    ListeningPort,
    ServerCommand,
    ServerOptions,
    scoring_of,
    server_command,
    server_environ,
    told,
    wait_ready,
)
from runner.serving.layout import Runtime
from runner.serving.refs import COPY_PREFIX, Served, checked_out

MAX_PORT = 65535
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RELAY_BYTES = 1 << 20
RELAY_PIPE_BYTES = 1 << 20
RELAY_PAUSE_SECONDS = 0.05


def add_arguments(parser) -> None:
    parser.add_argument("ref", help="NAME@vN, NAME@latest, a run id, or release:NAME@vN|@latest (from GitHub Releases)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"
    )
    parser.add_argument("--port", type=int, default=8080, help="default 8080; 0: a free port (printed)")
    parser.add_argument(
        "--runtime",
        choices=[r.value for r in Runtime],
        default=Runtime.TENSORFLOW.value,
        help="TensorFlow (default) or ONNX Runtime on the version's model.onnx",
    )
    parser.add_argument(
        "--batch",
        action="store_true",
        help=(
            ":predict requests that arrive while the model is busy run as one call (for models whose rows are"
            " independent)"
        ),
    )
    parser.add_argument(
        "--auth-token-env",
        metavar="NAME",
        help="require 'Authorization: Bearer KEY' on every route but health, KEY being $NAME's value",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=guard.DEFAULT_MAX_BODY_BYTES,
        help=f"larger request bodies are answered 413 (default {guard.DEFAULT_MAX_BODY_BYTES})",
    )
    parser.add_argument(
        "--openapi", action="store_true", help="serve /openapi.json and /docs too (behind the key, if any)"
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help=(
            "record the requests answered (route, body, answer, latency) as DIR/requests-NNNNNN.jsonl, for tftrain"
            " replay"
        ),
    )
    parser.add_argument(
        "--record-sample", type=float, default=1.0, help="with --record: the share of requests recorded (default 1)"
    )
    parser.add_argument(
        "--record-max-mb",
        type=int,
        default=200,
        help="with --record: recordings on disk at most, oldest dropped (default 200)",
    )
    add_verify_arguments(parser, "serve")


def run(args, logger) -> int:
    trusted_by = trusted(args)  # the key is read and checked before anything else
    runtime = Runtime(args.runtime)
    token = check_options(args, logger)
    check_port_free(args.host, args.port)
    # the copy's directory and its lifeline first: from here on, whatever ends tftrain, the copy goes
    with (
        tempfile.TemporaryDirectory(prefix=COPY_PREFIX) as workspace,
        supervision.lifeline(Path(workspace)) as lifeline_fd,
        release_errors(args.ref),
        checked_out(
            args.ref,
            logger,
            lambda: github_repo(args),
            Path(workspace),
            tftrain_home(),
            signature=(signature := Path(workspace) / SIGNATURE) if trusted_by else None,
        ) as served,
    ):
        if trusted_by is not None:  # what is served is what was signed: before anything of it is read, built or started
            verify_copy(served.directory.root, signature, trusted_by, served.label, logger)
        scoring = scoring_of(served)
        if scoring is not None:  # Azure's entry script on Azure's server: its own rules
            _check_scoring(args, served, scoring, token)
        options = ServerOptions(
            args.host, args.port, runtime, args.batch, args.openapi, args.max_body_bytes, token, recording_flags(args)
        )
        command = server_command(served, options, lifeline_fd, logger)
        check_port_free(args.host, args.port)  # again: building the environment can take minutes
        logger.info(f"serving {served.label}{command.described}")
        return _supervise(command, served, args, token, lifeline_fd, logger)


def recording_flags(args) -> tuple[str, ...]:
    """--record's for the server: DIR checked here first (made when missing; a link, a file, a directory
    that cannot be written: one line before anything starts), then by the server itself."""
    if args.record is None:
        return ()
    from runner.serving.recording import open_directory

    if not 0 < args.record_sample <= 1:
        raise UsageError(f"--record-sample {args.record_sample:g}: a share in (0, 1]")
    if args.record_max_mb < 1:
        raise UsageError(f"--record-max-mb {args.record_max_mb}: at least 1")
    try:
        os.close(open_directory(args.record))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return (
        "--record-dir",
        str(args.record.resolve()),
        "--record-sample",
        repr(args.record_sample),
        "--record-max-mb",
        str(args.record_max_mb),
    )


def _check_scoring(args, served: Served, scoring: dict, token: str | None) -> None:
    """A scoring script's version is served on azmlinfsrv: the KServe flags do not apply, and
    `auth: true` needs the key."""
    refused = [
        flag
        for flag, used in (
            ("--runtime onnx", args.runtime != Runtime.TENSORFLOW.value),
            ("--batch", args.batch),
            ("--openapi", args.openapi),
        )
        if used
    ]
    if refused:
        raise UsageError(
            f"{served.label} is served by its scoring script ({scoring['script']}): {', '.join(refused)} do not apply "
            "(azmlinfsrv serves /score and /swagger.json)"
        )
    if scoring.get("auth") and token is None:
        raise UsageError(
            f"{served.label} was registered with model.serving.auth: true: give the key with --auth-token-env NAME"
        )


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


def _supervise(command: ServerCommand, served: Served, args, token: str | None, lifeline_fd: int, logger) -> int:
    env = server_environ(command, token, args.auth_token_env)
    ready = command.readiness
    # its own session: a terminal's Ctrl-C reaches the server once, through us, not twice
    process = subprocess.Popen(
        command.argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        pass_fds=(lifeline_fd,),
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
        if wait_ready(process, args.host, port, ready.path):
            logger.info(f"{served.label} is ready:", style="bold green")
            for line in ready.lines(args.host, port.value, served.name):
                logger.text(f"  {line}")
            if token is not None:
                logger.text(f"  {ready.keyed.format(name=served.name)} 'Authorization: Bearer ${args.auth_token_env}'")
        elif not received:
            pump.join(timeout=5)
            raise ServingError(
                f"the model server stopped before it was ready (exit {process.returncode}): {told(tail)}"
            )
        code = process.wait()
        pump.join(timeout=5)
        if code != 0 and not received:  # it ended on its own (a scoring script's worker that ended, a crash): say why
            raise ServingError(
                f"the model server stopped (exit {code if code >= 0 else signal.Signals(-code).name}): {told(tail)}"
            )
    finally:
        if process.poll() is None:  # tftrain itself failing: never leave the server behind
            process.terminate()
            process.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever the server left in its process group
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


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
