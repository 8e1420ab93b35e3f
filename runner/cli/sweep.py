"""tftrain sweep join|resume SWEEP_ID: take part in a sweep (a shared `storage:`; the first to
join an id that does not exist yet creates it: a matrix of jobs all run the same command), or go
on with one that was stopped (its stopped trials from their last checkpoint)."""

from __future__ import annotations

import os
import re

from runner.cli.common import add_manifest_arg, load
from runner.errors import ManifestError, UsageError
from runner.manifest.fields import SWEEP_ID_PATTERN
from runner.paths import tftrain_home
from runner.settings import resolve


def add_arguments(parser) -> None:
    parser.add_argument(
        "action",
        choices=("join", "resume"),
        help="join: run trials of a running sweep; resume: go on with a stopped one",
    )
    parser.add_argument("sweep_id", metavar="SWEEP_ID")
    add_manifest_arg(parser, target=True)


def run(args, logger) -> int:
    from runner.sweep.driver import run_sweep

    if not re.fullmatch(SWEEP_ID_PATTERN, args.sweep_id):
        raise UsageError(
            f"SWEEP_ID {args.sweep_id!r}: a sweep id is NAME-sweep-N (e.g. digits-sweep-3, or"
            " digits-sweep-$GITHUB_RUN_ID)"
        )
    settings = resolve(os.environ, args)
    loaded = load(args, logger)
    if loaded.manifest.sweep is None:
        raise ManifestError(f"{loaded.path}: sweep: the manifest has no sweep section to {args.action}")
    from runner.verdict.sweeps import best_evidence

    home = tftrain_home()
    run_sweep(
        loaded,
        logger,
        settings,
        home,
        os.environ,
        sweep_id=args.sweep_id,
        resume=args.action == "resume",
        evidence=best_evidence(loaded, home, logger),
    )
    return 0
