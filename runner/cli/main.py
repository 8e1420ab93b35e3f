"""The `tftrain` command line."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

import runner
from runner.errors import FatalError

# Each command's module is imported only when that command runs: `tftrain --version` and the
# start of `tftrain run` must not pay for rich, docker, GitHub or the registry.
COMMANDS = {
    "run": ("runner.cli.run", "train from the manifest and register the model"),
    "plan": ("runner.cli.plan", "print the environment, Dockerfile and launch commands; run nothing"),
    "validate": ("runner.cli.validate", "check the manifest"),
    "schema": ("runner.cli.schema", "print the manifest's JSON Schema"),
    "runs": ("runner.cli.runs", "list runs, or show one"),
    "sweeps": ("runner.cli.sweeps", "list sweeps, or show one (--json)"),
    "sweep": ("runner.cli.sweep", "join a running sweep (shared storage), or resume a stopped one"),
    "logs": ("runner.cli.logs", "print a run's log"),
    "metrics": ("runner.cli.metrics", "print a run's metrics"),
    "models": ("runner.cli.models", "list registered models, pull or register one"),
    "images": ("runner.cli.images", "list the training images tftrain built, or prune old ones"),
    "pool": ("runner.cli.pool", "the runner pool (compute.target: pool): status, preflight, schema"),
    "github": ("runner.cli.github", "GitHub steps of the action: fork policy, pull-request comment"),
    "publish": ("runner.cli.publish", "publish a run's model to GitHub Releases (resumes a stopped publish)"),
    "compare": (
        "runner.cli.compare",
        "is a run or version better than another? (a verdict on kept per-example evidence)",
    ),
    "replay": (
        "runner.cli.replay",
        "send recorded requests to a candidate and a baseline version; compare their answers and latency",
    ),
    "serve": (
        "runner.cli.serve",
        "serve a registered model over HTTP (TensorFlow Serving's REST API and the Open Inference Protocol)",
    ),
    "deploy": (
        "runner.cli.deploy",
        "build a serving image of a registered model, smoke-test it, push it (or render a KServe InferenceService)",
    ),
    "import": ("runner.cli.importing", "write a tftrain.yml from another system's job definition"),
    "doctor": ("runner.cli.doctor", "check the run history; rebuild it from the run directories if damaged"),
}


def command_module(name: str):
    return importlib.import_module(COMMANDS[name][0])


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given argv, only the options of the command it names (the
    others are listed by name and help alone, so that their modules are not imported)."""
    chosen = None if argv is None else next((arg for arg in argv if not arg.startswith("-")), None)
    top = argparse.ArgumentParser(prog="tftrain", description="Train TensorFlow models from a manifest.")
    top.add_argument("--version", action="version", version=f"tftrain {runner.__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # `tftrain run …`: the other commands' parsers are not built (18 parsers took ~10 ms of the
    # script's start); where the command comes later or is unknown, all are, for the help and the errors
    alone = argv is not None and argv[:1] == [chosen] and chosen in COMMANDS
    for name, (_, text) in COMMANDS.items():
        if alone and name != chosen:
            continue
        command = sub.add_parser(name, help=text)
        if argv is None or name == chosen:
            command_module(name).add_arguments(command)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # importing a command's modules makes ~100k objects and no garbage: no collection pays for
    # itself there (~5 ms of `tftrain run`'s start). They are frozen after (gc.freeze): else the
    # first collections traverse them all (~25 ms before `tftrain run`'s script started)
    try:
        gc.disable()
        try:
            args = parser(argv).parse_args(argv)
            from runner.settings import LoggerSettings, own_process
            from runner.telemetry.logger import Logger
        finally:
            gc.freeze()
            gc.enable()
        with own_process(os.environ):
            return _run_command(args, Logger(settings=LoggerSettings.from_environment(os.environ)))
    finally:
        gc.unfreeze()  # a caller in the same process (the tests) collects its own garbage again


def _run_command(args: argparse.Namespace, logger) -> int:
    try:
        return command_module(args.command).run(args, logger)
    except FatalError as exc:
        if not getattr(exc, "annotated", False):  # a failed run annotated itself, at the script's line
            logger.annotate_located("error", str(exc))
        logger.flush()
        for line in logger.masker.text(str(exc)).splitlines() or [type(exc).__name__]:
            print(f"tftrain: error: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        logger.flush()
        print("tftrain: interrupted", file=sys.stderr)
        return 130
    finally:
        logger.flush()


if __name__ == "__main__":
    sys.exit(main())
