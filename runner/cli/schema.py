"""tftrain schema: the manifest's JSON Schema (shipped as tftrain.schema.json)."""

from __future__ import annotations

from runner.manifest.schema import json_schema


def add_arguments(parser) -> None:
    """No options."""


def run(args, logger) -> int:
    logger.text(json_schema().rstrip("\n"))
    return 0
