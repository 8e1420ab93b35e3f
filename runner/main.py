"""The `tftrain` command line."""

from __future__ import annotations

import argparse
import sys

import runner
from runner.commands import (
    doctor, github, images, importing, logs, metrics, models, plan, pool, publish, run, runs, schema, validate,
)
from runner.errors import FatalError
from runner.logger import Logger

COMMANDS = {
    "run": run,
    "plan": plan,
    "validate": validate,
    "schema": schema,
    "runs": runs,
    "logs": logs,
    "metrics": metrics,
    "models": models,
    "images": images,
    "pool": pool,
    "github": github,
    "publish": publish,
    "import": importing,
    "doctor": doctor,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tftrain", description="Train TensorFlow models from a manifest.")
    top.add_argument("--version", action="version", version=f"tftrain {runner.__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS.values():
        module.add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logger = Logger()
    try:
        return COMMANDS[args.command].run(args, logger)
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
