"""tftrain run: train from the manifest."""

from __future__ import annotations

import os

from runner.cli.common import add_manifest_arg, load
from runner.errors import error_class
from runner.run.pipeline import run_manifest
from runner.settings import resolve


def add_arguments(parser) -> None:
    add_manifest_arg(parser, target=True)


def run(args, logger) -> int:
    settings = resolve(os.environ, args)
    result = run_manifest(load(args, logger), logger, settings)
    if result.exit_code:
        error = error_class(result.exit_code)(f"run {result.run_id} {result.status}: {result.message}")
        error.annotated = True
        raise error
    return 0
