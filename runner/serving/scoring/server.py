"""A scoring script's server: Azure's own inference server (azmlinfsrv: its Flask app under
gunicorn, as `azmlinfsrv --entry_script` runs it) with runner.serving.scoring.guard in front.

    python -m runner.serving.scoring.server --model-dir VERSION_DIR --name NAME [--version N]
        [--host 127.0.0.1] [--port 8080] [--max-body-bytes N] [--lifeline-fd FD]

The version's scoring/SCRIPT is the entry script; AZUREML_MODEL_DIR and Model.get_model_path point
at its model/ (runner.compat.model_path). The port is bound here first (0: a free one; the line
`tftrain-serve: port N on HOST` says which) and handed to gunicorn; its one worker loads the script
and runs init() before it accepts a connection, so `GET /` answers only once init() is done. A
script that does not load or whose init() raises ends the worker, and gunicorn with it (exit 3):
the server is never left half-up. The key (TFTRAIN_SERVING_TOKEN, never argv) is taken out of the
environment before the script is loaded. run() raising ValueError, KeyError, IndexError or
TypeError (or TensorFlow's InvalidArgumentError) is the request's fault (400, one line); anything else 500 (the traceback in the log only).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import runner
from runner.serving import guard, supervision
from runner.serving.scoring import guard as scoring_guard, script as scoring_script

LOAD_FAILED = 3  # gunicorn's own exit status when its worker fails to boot
BAD_SETTING = 2
WORKER_TIMEOUT_SECONDS = "300"  # azmlinfsrv's default


def create():
    """gunicorn's app factory, in the worker: azmlinfsrv's app (importing it loads the script and
    runs init()), its run() calls classified, behind the guard."""
    failures: list[str] = []
    watch_start(failures)
    try:
        from azureml_inference_server_http.server.entry import app
    except SystemExit:  # azmlinfsrv's sys.exit(3) after logging the traceback: one line for tftrain
        print(f"tftrain-serve: error: {failures[-1] if failures else 'the scoring script did not start'}", file=sys.stderr, flush=True)
        raise
    classify(app.azml_blueprint.user_script)
    return scoring_guard.guarded(app)


def watch_start(failures: list[str]) -> None:
    """Keep, in one line each, why azmlinfsrv's loading of the script or its init() failed."""
    from azureml_inference_server_http.server import user_script

    load, init = user_script.UserScript.load_script, user_script.UserScript.invoke_init

    def told(self, exc: BaseException, what: str) -> str:
        script = Path(self.entry_script or "score.py")
        inner = getattr(exc, "user_ex", None)
        return f"scoring script {script.name}: {what} {scoring_script.told(inner, script) if inner is not None else str(exc)}"

    def load_script(self, app_root):
        try:
            return load(self, app_root)
        except user_script.UserScriptError as exc:
            failures.append(told(self, exc, "importing it raised" if getattr(exc, "user_ex", None) is not None else "does not load:"))
            raise

    def invoke_init(self):
        try:
            return init(self)
        except user_script.UserScriptError as exc:
            failures.append(told(self, exc, "init() raised"))
            raise

    user_script.UserScript.load_script, user_script.UserScript.invoke_init = load_script, invoke_init


def classify(user_script) -> None:
    """run()'s failures as the request's (400) or the script's (500), and an answer JSON cannot hold
    a 500 saying so, where azmlinfsrv would answer its generic 500."""
    from flask import Response

    from azureml_inference_server_http.api.aml_response import AMLResponse
    from azureml_inference_server_http.server.input_parsers import BadInput
    from azureml_inference_server_http.server.user_script import UserScriptException

    invoke, script = user_script.invoke_run, Path(user_script.entry_script or "score.py")
    log = logging.getLogger("tftrain.scoring")

    def invoke_run(request, *, timeout_ms):
        try:
            result = invoke(request, timeout_ms=timeout_ms)
        except UserScriptException as exc:
            if scoring_script.rejected(exc.user_ex):
                raise BadInput(f"the scoring script rejected the request: {scoring_script.told(exc.user_ex, script)}") from None
            raise
        if not isinstance(result.output, Response):
            problem = scoring_script.not_json(result.output)
            if problem:
                log.error(problem)
                return result._replace(output=AMLResponse({"message": problem}, 500, json_str=True, run_function_failed=True))
        return result

    user_script.invoke_run = invoke_run


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runner.serving.scoring.server", description="Serve a scoring script on azmlinfsrv.")
    parser.add_argument("--model-dir", type=Path, required=True, help="the version's directory: model/, scoring/, serving/serving.json")
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", type=int, default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-body-bytes", type=int, default=guard.DEFAULT_MAX_BODY_BYTES)
    parser.add_argument("--lifeline-fd", type=int, default=None)
    parser.add_argument("--grace-period", type=int, default=30)
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
    supervision.supervised(args.lifeline_fd, args.grace_period)
    try:
        token = guard.server_token(os.environ, args.max_body_bytes)
        root = args.model_dir.resolve()
        scoring = scoring_script.recorded(root) or {}
        script = script_of(root, scoring)
        if token is None and scoring.get("auth"):
            raise ValueError(f"the version was registered with model.serving.auth: true: set {guard.TOKEN_VARIABLE} to the key clients send")
        model = registered_model(root, scoring)
    except (ValueError, OSError) as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return BAD_SETTING
    try:
        listener = supervision.listen(args.host, args.port)
    except ValueError as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return LOAD_FAILED
    here = Path(runner.__file__).resolve().parents[1]  # the directory that holds `runner`
    os.environ.update(scoring_script.model_variables(model, args.name, args.version))
    os.environ.update({
        "AZUREML_ENTRY_SCRIPT": script.name, "AML_APP_ROOT": str(script.parent), "SERVICE_NAME": args.name,
        "PYTHONPATH": os.pathsep.join([str(scoring_script.shims(here)), os.environ.get("PYTHONPATH", "")]),
    })
    sys.path.insert(0, str(scoring_script.shims(here)))
    scoring_guard.configure(token, args.max_body_bytes)  # before gunicorn forks the worker that builds the app
    print(f"tftrain-serve: {args.name}: scoring script {script.name} on azmlinfsrv; "
          f"{'POST /score needs the bearer key' if token else 'no key: /score is open'}; bodies up to {args.max_body_bytes} bytes", flush=True)
    return run_gunicorn(listener, args)


def run_gunicorn(listener, args) -> int:
    """gunicorn as azmlinfsrv's amlserver_linux starts it, on the socket bound already."""
    import gunicorn.app.wsgiapp

    import gunicorn.config

    os.set_inheritable(listener.fileno(), True)
    # gunicorn ≥ 25 opens a control socket in $HOME, shared by every server of the user: not here
    quiet = ["--no-control-socket"] if hasattr(gunicorn.config, "ControlSocketDisable") else []
    sys.argv = [
        "azmlinfsrv", *quiet, "-b", f"fd://{listener.fileno()}", "-w", "1",
        "--timeout", os.environ.get("WORKER_TIMEOUT", WORKER_TIMEOUT_SECONDS), "--graceful-timeout", str(args.grace_period),
        "--access-logfile", "-", "--error-logfile", "-", "runner.serving.scoring.server:create()",
    ]
    try:
        gunicorn.app.wsgiapp.WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]").run()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
