"""One module per `tftrain` subcommand; each has `add_parser(subparsers)` and `run(args, logger)`."""

from __future__ import annotations

import argparse

from runner.logger import Logger
from runner.manifest import DEFAULT_NAME, LoadedManifest, load_manifest


def add_manifest_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", default=DEFAULT_NAME, help=f"the manifest (default: {DEFAULT_NAME})")


def load(args: argparse.Namespace, logger: Logger) -> LoadedManifest:
    loaded = load_manifest(args.file)
    for warning in loaded.warnings:
        logger.warning(warning)
    return loaded
