"""The scoring server's worker side: Azure's inference server (azmlinfsrv's Flask app under gunicorn,
one sync worker, as `azmlinfsrv --entry_script` runs it) on a Unix socket that only the front
(runner.serving.scoring.front, in runner.serving.scoring.server's process) connects to.

    python -m runner.serving.scoring.app --backend-fd FD [--max-body-bytes N] [--grace-period S]

Started by runner.serving.scoring.server with the model's variables in its environment and the key,
if any, in TFTRAIN_SERVING_TOKEN (taken out before the script is loaded). The worker loads the
script and runs init() before it accepts a connection. A worker that ends, for whatever reason,
while the server is not stopping ends the server with one line saying why (exit 3): while booting
(the script's import or init() failed, or ended the process), or afterwards (run() or a thread of
the script ended it) — never a re-boot loop, never a half-up server. A request that runs past
WORKER_TIMEOUT (300 s) is the exception: gunicorn ends that worker and boots another, as on Azure.
run() raising ValueError, KeyError, IndexError or TypeError (or TensorFlow's InvalidArgumentError)
is the request's fault (400, one line); anything else 500 (the traceback in the log only).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from runner.serving import guard, supervision
from runner.serving.scoring import guard as scoring_guard
from runner.serving.scoring import script as scoring_script

LOAD_FAILED = 3  # gunicorn's own exit status when its worker fails to boot
WORKER_TIMEOUT_SECONDS = "300"  # azmlinfsrv's default
BOOTED, TOLD = b"B", b"T"  # what a worker writes on the arbiter's pipe: init() done; its failure told already


def create():
    """The app, in the worker: azmlinfsrv's app (importing it loads the script and runs init()),
    its run() calls classified, behind the guard."""
    failures: list[str] = []
    quiet_model_ids()
    watch_start(failures)
    try:
        from azureml_inference_server_http.server.entry import app
    except SystemExit:  # azmlinfsrv's sys.exit(3) after logging the traceback: one line for tftrain
        print(
            f"tftrain-serve: error: {failures[-1] if failures else 'the scoring script did not start'}",
            file=sys.stderr,
            flush=True,
        )
        tell(TOLD)
        raise
    classify(app.azml_blueprint.user_script)
    return scoring_guard.guarded(app)


def quiet_model_ids() -> None:
    """azmlinfsrv's App Insights client lists AZUREML_MODEL_DIR as Azure's models/NAME/VERSION tree
    and logs a traceback for any other (a SavedModel's directory is one): name the model instead."""
    from azureml_inference_server_http.server import appinsights_client

    name, version = os.environ.get("TFTRAIN_MODEL_NAME", ""), os.environ.get("TFTRAIN_MODEL_VERSION", "1")
    appinsights_client.AppInsightsClient._get_model_ids = lambda self: [f"{name}:{version}"]


def watch_start(failures: list[str]) -> None:
    """Keep, in one line each, why azmlinfsrv's loading of the script or its init() failed; from
    then on azmlinfsrv logs nothing (its tracebacks and directory listing: the one line says it)."""
    from azureml_inference_server_http.server import user_script

    load, init = user_script.UserScript.load_script, user_script.UserScript.invoke_init

    def told(self, exc: BaseException, what: str) -> str:
        script = Path(self.entry_script or "score.py")
        inner = getattr(exc, "user_ex", None)
        return (
            f"scoring script {script.name}: {what}"
            f" {scoring_script.told(inner, script) if inner is not None else str(exc)}"
        )

    def failed(line: str) -> None:
        failures.append(line)
        logging.disable(
            logging.CRITICAL
        )  # the worker exits next: azmlinfsrv's own account is the same, with tracebacks

    def load_script(self, app_root):
        try:
            return load(self, app_root)
        except user_script.UserScriptError as exc:
            failed(
                told(
                    self, exc, "importing it raised" if getattr(exc, "user_ex", None) is not None else "does not load:"
                )
            )
            raise

    def invoke_init(self):
        try:
            return init(self)
        except user_script.UserScriptError as exc:
            failed(told(self, exc, "init() raised"))
            raise

    user_script.UserScript.load_script, user_script.UserScript.invoke_init = load_script, invoke_init


def classify(user_script) -> None:
    """run()'s failures as the request's (400) or the script's (500), and an answer JSON cannot hold
    a 500 saying so, where azmlinfsrv would answer its generic 500."""
    from azureml_inference_server_http.api.aml_response import AMLResponse
    from azureml_inference_server_http.server.input_parsers import BadInput
    from azureml_inference_server_http.server.user_script import UserScriptException
    from flask import Response

    invoke, script = user_script.invoke_run, Path(user_script.entry_script or "score.py")
    log = logging.getLogger("tftrain.scoring")

    def invoke_run(request, *, timeout_ms):
        try:
            result = invoke(request, timeout_ms=timeout_ms)
        except UserScriptException as exc:
            if scoring_script.rejected(exc.user_ex):
                raise BadInput(
                    f"the scoring script rejected the request: {scoring_script.told(exc.user_ex, script)}"
                ) from None
            raise
        if not isinstance(result.output, Response):
            problem = scoring_script.not_json(result.output)
            if problem:
                log.error(problem)
                return result._replace(
                    output=AMLResponse({"message": problem}, 500, json_str=True, run_function_failed=True)
                )
        return result

    user_script.invoke_run = invoke_run


_TELL: list[int] = []  # the write end of the arbiter's pipe, in the worker


def tell(what: bytes) -> None:
    if _TELL:
        os.write(_TELL[0], what + str(os.getpid()).encode() + b"\n")


def worker_ended(pid: int, status: int, booted: bool) -> str:
    """One line: why the server stops, for a worker that ended on its own."""
    how = (
        f"exit {os.waitstatus_to_exitcode(status)}"
        if os.WIFEXITED(status)
        else f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    )
    script = os.environ.get("AZUREML_ENTRY_SCRIPT", "score.py")
    if not booted:
        return (
            f"scoring script {script}: its worker ended ({how}) before init() finished: the import or init() ended the"
            " process"
        )
    return (
        f"scoring script {script}: its worker (pid {pid}) ended ({how}) while serving: run() or the script ended the"
        " process; the server stops"
    )


def arbiter_class():
    from gunicorn.arbiter import Arbiter

    class ScoringArbiter(Arbiter):
        """gunicorn's arbiter, but a worker that ends while the server is not stopping ends the
        server, with one line (gunicorn would boot another: init() again, and again)."""

        def __init__(self, app, pipe: int) -> None:
            super().__init__(app)
            self.pipe, self.booted, self.told = pipe, set(), set()

        def reap_workers(self):
            for pid in list(self.WORKERS):
                try:
                    ended, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    continue
                if ended:
                    worker = self.WORKERS.pop(pid)
                    worker.tmp.close()
                    self.worker_ended(pid, status, getattr(worker, "aborted", False))
            super().reap_workers()  # anything else (an orphan it adopted)

        def worker_ended(self, pid: int, status: int, timed_out: bool) -> None:
            self.read_pipe()
            if not self.LISTENERS:
                return  # stopping: gunicorn's own SIGTERM to it
            if timed_out and pid in self.booted:  # gunicorn's timeout on one request: a new worker, as Azure does
                print(
                    f"tftrain-serve: warning: a request to the scoring script ran past WORKER_TIMEOUT ({self.timeout}"
                    " s): its worker was ended; a new one runs init()",
                    file=sys.stderr,
                    flush=True,
                )
                return
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                return  # gunicorn's own reasons (max_requests): a new one
            if pid not in self.told:
                print(
                    f"tftrain-serve: error: {worker_ended(pid, status, pid in self.booted)}",
                    file=sys.stderr,
                    flush=True,
                )
            self.stop()
            raise SystemExit(LOAD_FAILED)

        def read_pipe(self) -> None:
            try:
                data = os.read(self.pipe, 65536)
            except BlockingIOError:
                return
            for line in data.splitlines():
                (self.booted if line[:1] == BOOTED else self.told).add(int(line[1:] or 0))

    return ScoringArbiter


def run_gunicorn(args: argparse.Namespace) -> int:
    """gunicorn on the socket bound already, its worker building create()'s app."""
    from gunicorn.app.base import BaseApplication

    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    settings = {
        "bind": [f"fd://{args.backend_fd}"],
        "workers": 1,
        "worker_class": "sync",
        "timeout": int(os.environ.get("WORKER_TIMEOUT", WORKER_TIMEOUT_SECONDS)),
        "graceful_timeout": args.grace_period,
        "accesslog": "-",
        "errorlog": "-",
        "loglevel": "warning",  # gunicorn's start-up lines name a private socket
        "post_fork": lambda arbiter, worker: (os.close(read_end), _TELL.append(write_end)),
        "post_worker_init": lambda worker: tell(BOOTED),
        # the timed-out request's SystemExit is azmlinfsrv's 500 with a traceback: the arbiter's one line says it
        "worker_abort": lambda worker: logging.disable(logging.CRITICAL),
    }

    class ScoringApplication(BaseApplication):
        def load_config(self):
            for key, value in settings.items():
                if key in self.cfg.settings:
                    self.cfg.set(key, value)
            # gunicorn ≥ 25: a control socket in $HOME, shared by the user's servers
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self):
            return create()

    try:
        arbiter_class()(ScoringApplication(), read_end).run()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner.serving.scoring.app", description="azmlinfsrv under gunicorn, behind the front."
    )
    parser.add_argument("--backend-fd", type=int, required=True, help="a listening Unix socket")
    parser.add_argument("--max-body-bytes", type=int, default=guard.DEFAULT_MAX_BODY_BYTES)
    parser.add_argument("--grace-period", type=int, default=30)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    supervision.end_with_parent()
    try:
        token = guard.server_token(os.environ, args.max_body_bytes)
    except ValueError as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return 2
    scoring_guard.configure(token, args.max_body_bytes)  # before gunicorn forks the worker that builds the app
    sys.argv[1:] = []
    return run_gunicorn(args)


if __name__ == "__main__":
    sys.exit(main())
