"""tftrain validate: check the manifest, print nothing else."""

from __future__ import annotations

from runner.cli.common import add_manifest_arg, load


def add_arguments(parser) -> None:
    add_manifest_arg(parser)


def run(args, logger) -> int:
    loaded = load(args, logger)
    logger.info(f"{loaded.path}: valid", style="green")
    return 0
