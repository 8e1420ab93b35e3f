"""One module per `tftrain` subcommand (listed in runner.cli.main); each has `add_arguments(parser)` and `run(args,
logger)`."""

from __future__ import annotations

import argparse
import os
import re

from runner.errors import ManifestError
from runner.manifest import DEFAULT_NAME, LoadedManifest, load_manifest
from runner.manifest.fields import NAME_PATTERN
from runner.shared import catalog
from runner.telemetry.logger import Logger


def add_manifest_arg(parser: argparse.ArgumentParser, target: bool = False) -> None:
    parser.add_argument("-f", "--file", default=DEFAULT_NAME, help=f"the manifest (default: {DEFAULT_NAME})")
    if target:
        parser.add_argument(
            "--target",
            type=target_name,
            metavar="{" + ",".join(catalog.BUILT_IN) + "}",
            help="run on this target instead of the manifest's compute.target (or a plugin's target)",
        )
        parser.add_argument("--model-name", help="the model's name instead of the manifest's name")


def target_name(value: str) -> str:
    """--target's value: a target of the catalog (a plugin's too), else argparse's one line with a close match."""
    if catalog.row_of(value) is not None:
        return value
    import difflib

    known = catalog.names()
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a target: one of {', '.join(known)}" + (f"; did you mean {close[0]!r}?" if close else "")
    )


def load(args: argparse.Namespace, logger: Logger) -> LoadedManifest:
    loaded = load_manifest(args.file)
    logger.mask_secrets(loaded.manifest.secrets, os.environ)  # before tftrain prints anything else
    if loaded.manifest.model.signing is not None:  # masked above; from here on in tftrain's memory only
        from runner.history.signing import withhold

        withhold(loaded.manifest.model.signing.private_key_secret)
    if getattr(args, "target", None):
        manifest = loaded.manifest
        compute = manifest.compute.model_copy(update={"target": args.target})
        loaded = loaded._replace(manifest=manifest.model_copy(update={"compute": compute}))
    if getattr(args, "model_name", None):
        if not re.fullmatch(NAME_PATTERN, args.model_name):
            raise ManifestError(f"--model-name {args.model_name!r}: letters, digits, '.', '_' and '-', at most 64")
        loaded = loaded._replace(manifest=loaded.manifest.model_copy(update={"name": args.model_name}))
    for warning in loaded.warnings:
        logger.warning(warning)
    return loaded
