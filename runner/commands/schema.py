"""tftrain schema: the manifest's JSON Schema (shipped as tftrain.schema.json)."""

from __future__ import annotations

from runner.manifest import json_schema


def add_parser(subparsers) -> None:
    subparsers.add_parser("schema", help="print the manifest's JSON Schema")


def run(args, logger) -> int:
    logger.text(json_schema().rstrip("\n"))
    return 0
