"""Inputs (datasets): local paths, https:// files (one, or a list of them: one directory) and s3:// prefixes.

Remote inputs are downloaded once into a content-addressed cache (`<cache>/data/sha256/<digest>`,
runner.training.downloads, imported only when a manifest has one) and handed to the training
read-only: a path on this machine, a read-only mount in a container. `mode` (download | mount)
is accepted as in Azure ML; both read from the cached copy.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import PreparingError
from runner.manifest import LoadedManifest
from runner.paths import data_cache
from runner.telemetry.logger import Logger

REMOTE = ("http://", "https://", "s3://")


def fetch_inputs(loaded: LoadedManifest, logger: Logger, dry_run: bool = False) -> dict[str, Path]:
    paths = {}
    for name, spec in loaded.manifest.inputs.items():
        where = f"inputs.{name}.source"
        if isinstance(spec.source, list) or spec.source.lower().startswith(REMOTE):
            from runner.training.downloads import fetch_remote

            paths[name] = fetch_remote(spec, where, logger, dry_run)
        elif "://" in spec.source:
            raise PreparingError(f"{where}: {spec.source!r}: only https://, http://, s3:// or a local path")
        else:
            path = (loaded.base_dir / spec.source).resolve()
            if not path.exists():
                raise PreparingError(f"{where}: {path} does not exist")
            paths[name] = path
    return paths


def digest_of(path: Path) -> str | None:
    """The sha256 of a fetched input (the cache keeps it under its content's digest); None for a
    local path."""
    try:
        return path.relative_to(data_cache() / "sha256").parts[0]
    except (ValueError, IndexError):
        return None
