"""A scoring script's server: Azure's own inference server (azmlinfsrv: its Flask app under
gunicorn, as `azmlinfsrv --entry_script` runs it; runner.serving.scoring.app) behind a front that
owns the public port (runner.serving.scoring.front).

    python -m runner.serving.scoring.server --model-dir VERSION_DIR --name NAME [--version N]
        [--host 127.0.0.1] [--port 8080] [--max-body-bytes N] [--lifeline-fd FD]

The version's scoring/SCRIPT is the entry script; AZUREML_MODEL_DIR and Model.get_model_path point
at its model/ (runner.compat.model_path). The port is bound here first (0: a free one; the line
`tftrain-serve: port N on HOST` says which) and only this process ever holds it: gunicorn runs in a
process of its own (its own process group) on a private Unix socket, and the front here reads each
client's request whole before handing it on, so a slow or silent client never holds the one sync
worker. The worker loads the script and runs init() before it accepts a connection, so `GET /`
answers only once init() is done. A script that does not load, whose init() raises, or whose worker
ends ends the server (exit 3, one line): it is never left half-up, and never re-boots in a loop (a
request past WORKER_TIMEOUT excepted: gunicorn boots a new worker, as Azure does).
The key (TFTRAIN_SERVING_TOKEN, never argv) reaches the worker's environment only and is taken out
before the script is loaded. Nothing the server started outlives it: this process adopts every
orphan below it and, at its end, kills gunicorn's process group and whatever is left (a daemon the
script forked, setsid or not).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import runner
from runner.serving import guard, supervision
from runner.serving.recording import Recorder, recorder_of, recording_arguments
from runner.serving.scoring import front as scoring_front
from runner.serving.scoring import script as scoring_script

LOAD_FAILED = 3  # gunicorn's own exit status when its worker fails to boot
BAD_SETTING = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner.serving.scoring.server", description="Serve a scoring script on azmlinfsrv."
    )
    parser.add_argument(
        "--model-dir", type=Path, required=True, help="the version's directory: model/, scoring/, serving/serving.json"
    )
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", type=int, default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-body-bytes", type=int, default=guard.DEFAULT_MAX_BODY_BYTES)
    parser.add_argument("--lifeline-fd", type=int, default=None)
    parser.add_argument("--grace-period", type=int, default=30)
    recording_arguments(parser)
    return parser.parse_args(argv)


def script_of(root: Path, scoring: dict) -> Path:
    """The version's scoring script, as serving.json's "scoring" names it."""
    name = scoring.get("script")
    if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
        raise ValueError("the version records no scoring script")
    script = root / "scoring" / name
    if script.is_symlink() or not script.is_file():
        raise ValueError(f"the version's scoring/{name} is missing")
    return script


def registered_model(root: Path, scoring: dict) -> Path:
    """model/ for a registered directory; the file in it for a registered file (the gate's "layout")."""
    model = root / "model"
    if scoring.get("layout") == "file":
        files = [path for path in model.iterdir() if path.is_file() and not path.is_symlink()]
        if len(files) == 1:
            return files[0]
    return model


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    app: list[subprocess.Popen] = []
    supervision.supervised(
        args.lifeline_fd, args.grace_period, give_up=lambda: supervision.end_descendants(app[0].pid if app else None)
    )
    try:
        token = guard.server_token(os.environ, args.max_body_bytes)
        root = args.model_dir.resolve()
        scoring = scoring_script.recorded(root) or {}
        script = script_of(root, scoring)
        if token is None and scoring.get("auth"):
            raise ValueError(
                f"the version was registered with model.serving.auth: true: set {guard.TOKEN_VARIABLE} to the key"
                " clients send"
            )
        model = registered_model(root, scoring)
        recorder = recorder_of(args)
    except (ValueError, OSError) as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return BAD_SETTING
    try:
        listener = supervision.listen(args.host, args.port)
    except ValueError as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return LOAD_FAILED
    here = Path(runner.__file__).resolve().parents[1]  # the directory that holds `runner`
    env = {
        **os.environ,
        **scoring_script.model_variables(model, args.name, args.version),
        "AZUREML_ENTRY_SCRIPT": script.name,
        "AML_APP_ROOT": str(script.parent),
        "SERVICE_NAME": args.name,
        "PYTHONPATH": os.pathsep.join([str(scoring_script.shims(here)), os.environ.get("PYTHONPATH", "")]),
    }
    if token is not None:
        env[guard.TOKEN_VARIABLE] = token.decode("ascii")
    print(
        f"tftrain-serve: {args.name}: scoring script {script.name} on azmlinfsrv;"
        f" {'POST /score needs the bearer key' if token else 'no key: /score is open'}; bodies up to"
        f" {args.max_body_bytes} bytes",
        flush=True,
    )
    supervision.adopt_orphans()
    with tempfile.TemporaryDirectory(prefix="tftrain-scoring-") as private:
        try:
            return serve(listener, Path(private) / "worker.sock", env, args, app, recorder)
        finally:
            supervision.end_descendants(app[0].pid if app else None)
            if recorder is not None:
                recorder.close()


def serve(
    listener: socket.socket,
    backend: Path,
    env: dict[str, str],
    args: argparse.Namespace,
    app: list[subprocess.Popen],
    recorder: Recorder | None = None,
) -> int:
    """gunicorn (runner.serving.scoring.app) on `backend`, the front on `listener`, until SIGTERM or
    SIGINT (a drain: the front stops accepting, then gunicorn stops) or gunicorn's own end."""
    worker_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    worker_socket.bind(str(backend))
    worker_socket.listen(2048)
    argv = [
        sys.executable,
        "-m",
        "runner.serving.scoring.app",
        "--backend-fd",
        str(worker_socket.fileno()),
        "--max-body-bytes",
        str(args.max_body_bytes),
        "--grace-period",
        str(args.grace_period),
    ]
    # its own process group: ended as one (end_descendants), and a terminal's signals reach it through here
    app.append(subprocess.Popen(argv, env=env, pass_fds=(worker_socket.fileno(),), start_new_session=True))
    worker_socket.close()
    return asyncio.run(run_front(listener, str(backend), app[0], args, recorder))


async def run_front(
    listener: socket.socket,
    backend: str,
    app: subprocess.Popen,
    args: argparse.Namespace,
    recorder: Recorder | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    front = scoring_front.Front(backend, args.max_body_bytes, recorder)
    await front.start(listener)
    ended = loop.run_in_executor(None, app.wait)
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({ended, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not ended.done():  # asked to stop: no new connection, the requests in flight finish, then gunicorn stops
        await front.drain(args.grace_period)
        app.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(ended), args.grace_period + supervision.STOP_GRACE_SECONDS)
        except asyncio.TimeoutError:  # its clean stop did not finish: ended outright (the wait's thread with it)
            supervision.end_descendants(app.pid)
            await ended
    stopping.cancel()
    await front.close()
    code = app.poll()
    return LOAD_FAILED if code is None else (code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main())
