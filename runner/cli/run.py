"""tftrain run: train from the manifest (a sweep when it has a `sweep:` section)."""

from __future__ import annotations

import os

from runner.cli.common import add_manifest_arg, load
from runner.errors import error_class
from runner.paths import tftrain_home
from runner.settings import resolve
from runner.training.retry import run_with_retry


def add_arguments(parser) -> None:
    add_manifest_arg(parser, target=True)
    parser.add_argument("--no-sweep", action="store_true", help="run the manifest's script_params once, not its sweep")


def run(args, logger) -> int:
    settings, home = resolve(os.environ, args), tftrain_home()
    loaded = load(args, logger)
    if loaded.manifest.sweep is not None:
        if not args.no_sweep:
            from runner.sweep.driver import run_sweep
            from runner.verdict.sweeps import best_evidence

            run_sweep(loaded, logger, settings, home, os.environ, evidence=best_evidence(loaded, home, logger))
            return 0
        loaded = loaded._replace(manifest=loaded.manifest.model_copy(update={"sweep": None}))
    if loaded.manifest.evaluation is not None:  # several seeds, their evidence and the verdict
        from runner.verdict.driver import run_evaluated

        result = run_evaluated(loaded, logger, settings, home, os.environ)
    else:
        result = run_with_retry(loaded, logger, settings, home)
    if result.exit_code:
        error = error_class(result.exit_code)(f"run {result.run_id} {result.status}: {result.message}")
        error.annotated = True
        raise error
    return 0
