"""A model server started the way `tftrain serve` starts one: a version's serving environment
(runner.environments, built once and cached), the KServe server (runner.serving.server) or, for a
version registered with a scoring script, Azure's azmlinfsrv behind tftrain's front
(runner.serving.scoring.server), with a lifeline (runner.serving.supervision), and one readiness
wait. `tftrain serve` runs it in the foreground (runner.cli.serve); BackgroundServer runs one
beside others, its log in a file (the replay: runner.replay.engine).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runner.errors import ServingError, UsageError
from runner.serving import guard, supervision
from runner.serving.layout import Runtime
from runner.serving.readiness import Waited
from runner.serving.readiness import wait_ready as wait_ready_until
from runner.serving.refs import Served
from runner.serving.scoring.script import packages_of, recorded

READY_TIMEOUT_SECONDS = 900  # TensorFlow's import plus a large model's load, on a slow machine
POLL_SECONDS = 0.2
STOP_SECONDS = 30  # a background server's drain, before it is ended outright


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


def scoring_endpoints(host: str, port: int, name: str) -> list[str]:
    base = base_url(host, port)
    return [
        f"POST {base}/score  (Azure's scoring contract: the script's run(raw_data))",
        f"GET  {base}/  (liveness)  and  {base}/swagger.json",
    ]


@dataclass(frozen=True)
class Readiness:
    """How a started server is known to be up, and what `tftrain serve` then prints."""

    path: str
    lines: Callable[[str, int, str], list[str]]
    keyed: str  # which routes the key guards (with the verb), for the ready message


KSERVE = Readiness("/v2/health/ready", endpoints, "every route but health (/, /v2/health/*, /v1/models/{name}) needs")
SCORING = Readiness("/", scoring_endpoints, "/score and /swagger.json need")


@dataclass(frozen=True)
class ServerOptions:
    """What `tftrain serve`'s flags say about the server itself (the replay takes the defaults)."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free one, read from the server's first line
    runtime: Runtime = Runtime.TENSORFLOW
    batch: bool = False
    openapi: bool = False
    max_body_bytes: int = guard.DEFAULT_MAX_BODY_BYTES
    token: str | None = None  # TFTRAIN_SERVING_TOKEN in the server's environment, never argv
    extra: tuple[str, ...] = ()  # further server arguments (recording)


@dataclass(frozen=True)
class ServerCommand:
    argv: list[str]
    pythonpath: Path
    readiness: Readiness
    scoring: dict | None = None  # serving.json's scoring block, for a scoring-script version
    described: str = ""  # after "serving LABEL" in tftrain serve's line
    environ: dict = field(default_factory=dict)


def scoring_of(served: Served) -> dict | None:
    return recorded(served.directory.root)


def server_command(served: Served, options: ServerOptions, lifeline_fd: int, logger) -> ServerCommand:
    """The server for `served` in its environment (built on first use: minutes), ready to start."""
    from runner.environments import link_runner, prepare_serving_env, scoring_spec, serving_spec

    scoring = scoring_of(served)
    pythonpath = link_runner(served.directory.root.parent / "pythonpath")
    common = [
        "--model-dir",
        str(served.directory.root),
        "--name",
        served.name,
        "--host",
        options.host,
        "--port",
        str(options.port),
        "--max-body-bytes",
        str(options.max_body_bytes),
        "--lifeline-fd",
        str(lifeline_fd),
    ]
    common += ["--version", str(served.version)] if served.version is not None else []
    if scoring is not None:  # Azure's entry script on Azure's server (runner.serving.scoring.server)
        try:
            packages = packages_of(scoring)
        except ValueError as exc:
            raise ServingError(f"{served.label}: {exc}") from None
        env = prepare_serving_env(scoring_spec(served.framework_version, packages), logger)
        argv = [env.python, "-m", "runner.serving.scoring.server", *common, *options.extra]
        return ServerCommand(
            argv, pythonpath, SCORING, scoring, f": scoring script {scoring['script']} on azmlinfsrv in {env.python}"
        )
    check_servable(served, options.runtime)
    env = prepare_serving_env(serving_spec(served.framework_version, onnx=options.runtime is Runtime.ONNX), logger)
    argv = [env.python, "-m", "runner.serving.server", *common, "--runtime", options.runtime.value]
    argv += [flag for flag, on in (("--batch", options.batch), ("--openapi", options.openapi)) if on]
    return ServerCommand(
        argv + list(options.extra), pythonpath, KSERVE, None, f" ({options.runtime.value}) in {env.python}"
    )


def check_servable(served: Served, runtime: Runtime) -> None:
    if runtime is Runtime.ONNX and not served.directory.onnx.is_file():
        raise ServingError(
            f"{served.label} has no model.onnx: serve it with --runtime tensorflow, or register it with ONNX export on"
        )
    if runtime is Runtime.TENSORFLOW and served.directory.located() is None:
        raise ServingError(
            f"{served.label} has no loadable model: its model/ holds no SavedModel directory, .keras or .h5 file"
        )


def server_environ(command: ServerCommand, token: str | None, token_variable: str | None = None) -> dict[str, str]:
    """The server's environment: the key, when there is one, under the one name the server reads."""
    from runner.environments import server_env

    env = server_env(command.pythonpath)
    env.pop(guard.TOKEN_VARIABLE, None)  # the server is open unless a key is given
    if token is not None:
        if token_variable:
            env.pop(token_variable, None)  # one copy of the key in its environment
        env[guard.TOKEN_VARIABLE] = token
    return env


class ListeningPort:
    """The server's port: the one asked for, or (port 0) the one its first line names."""

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


def wait_ready(
    process: subprocess.Popen,
    host: str,
    port: ListeningPort,
    path: str = KSERVE.path,
    timeout: float = READY_TIMEOUT_SECONDS,
) -> bool:
    """True once `path` (/v2/health/ready; a scoring server's /) answers 200; False when the server exits first."""
    target = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)

    def ready() -> bool:
        connection = http.client.HTTPConnection(target, port.value, timeout=2)
        try:
            connection.request("GET", path)
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    outcome = wait_ready_until(ready, lambda: process.poll() is not None, timeout, POLL_SECONDS, port.known.wait)
    if outcome is Waited.TIMED_OUT:
        raise ServingError(f"the model server did not become ready in {timeout:g} s")
    return outcome is Waited.READY


def told(tail: list[str]) -> str:
    """The server's own last error line (before gunicorn's), else its last line."""
    said = [line for line in tail if line.startswith("tftrain-serve: error:")]
    return (said or [line for line in tail if line.strip()] or ["no output"])[-1].strip()


class BackgroundServer:
    """One version served on a free port of 127.0.0.1 for as long as the context lasts, its output in
    `log`; ServingError (one line: the server's own) when it stops before it is ready. On the way
    out it is stopped (SIGTERM: it drains), then ended outright with whatever it started."""

    def __init__(self, served: Served, log: Path, logger, options: ServerOptions = ServerOptions()) -> None:
        if options.port or options.host != "127.0.0.1":
            raise UsageError("a background server listens on a free port of 127.0.0.1")
        self.served, self.log, self.logger, self.options = served, log, logger, options
        self.port = ListeningPort(0)
        self.tail: list[str] = []
        self._stack = contextlib.ExitStack()
        self.process: subprocess.Popen | None = None
        self.command: ServerCommand | None = None

    @property
    def url(self) -> str:
        return base_url(self.options.host, self.port.value)

    def __enter__(self) -> BackgroundServer:
        try:
            fd = self._stack.enter_context(supervision.lifeline(self.served.directory.root))
            self.command = server_command(self.served, self.options, fd, self.logger)
            self.log.parent.mkdir(parents=True, exist_ok=True)
            out = self._stack.enter_context(open(self.log, "wb"))
            self.process = subprocess.Popen(
                self.command.argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=server_environ(self.command, self.options.token),
                start_new_session=True,
                pass_fds=(fd,),
            )
            pump = threading.Thread(target=self._pump, args=(out,), name=f"server-{self.served.name}", daemon=True)
            pump.start()
            if not wait_ready(self.process, self.options.host, self.port, self.command.readiness.path):
                pump.join(timeout=5)
                raise ServingError(
                    f"{self.served.label}: the model server stopped before it was ready "
                    f"(exit {self.process.returncode}): {told(self.tail)} (log: {self.log})"
                )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _pump(self, out) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            out.write(raw)
            out.flush()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail[:] = [*self.tail[-19:], line]
            if not self.port.known.is_set():
                self.port.read(line)

    def __exit__(self, *exc) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # whatever the server left in its process group
        self._stack.close()
