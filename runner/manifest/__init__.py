"""Read, validate and normalise the training manifest (`tftrain.yml`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from runner.errors import ManifestError
from runner.manifest.document import YamlDocument, one_line
from runner.manifest.framework_rules import framework_warnings
from runner.manifest.loading import load_yaml
from runner.manifest.model import Manifest, effective_target
from runner.manifest.rules import check_rules, migrate_deprecated
from runner.manifest.validate import format_loc, validation_messages

__all__ = ["LoadedManifest", "Manifest", "effective_target", "load_manifest", "manifest_class", "stored_manifest"]

DEFAULT_NAME = "tftrain.yml"


class LoadedManifest(NamedTuple):
    manifest: Manifest
    path: Path
    warnings: tuple[str, ...]

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def source_dir(self) -> Path:
        return (self.base_dir / self.manifest.source_directory).resolve()


def load_manifest(path: Path | str = DEFAULT_NAME) -> LoadedManifest:
    path = Path(path)
    doc = load_yaml(path)
    if doc.empty:
        raise ManifestError(one_line(f"{doc.where(())}: (top level): the manifest is empty"))
    if not isinstance(doc.data, dict):
        raise ManifestError(one_line(f"{doc.where(())}: (top level): the manifest must be a mapping of keys to values"))
    model = manifest_class(doc.data)
    try:
        manifest = model.model_validate(doc.data)
    except ValidationError as exc:
        raise ManifestError("\n".join(validation_messages(exc, doc, model))) from None
    manifest, warnings, errors = migrate_deprecated(manifest)
    errors += check_rules(manifest, path.resolve().parent)
    if errors:
        raise ManifestError("\n".join(_lines(doc, errors)))
    if manifest.sweep is not None:
        from runner.manifest.sweep_rules import sweep_warnings

        warnings += sweep_warnings(manifest)
    warnings += framework_warnings(manifest)
    return LoadedManifest(manifest, path.resolve(), tuple(_lines(doc, warnings)))


def manifest_class(data: Mapping[str, Any]) -> type[Manifest]:
    """The model that validates `data`: Manifest, or SweptManifest where it has a sweep (whose
    models are imported, defined and built only then)."""
    if data.get("sweep") is None:
        return Manifest
    from runner.manifest.sweep import SweptManifest

    return SweptManifest


def stored_manifest(text: str | bytes) -> Manifest:
    """A manifest as the history keeps it (model_dump_json); ValueError where it is not one."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    return manifest_class(data).model_validate_json(text)


def _lines(doc: YamlDocument, problems) -> list[str]:
    return [one_line(f"{doc.where(loc)}: {format_loc(loc)}: {message}") for loc, message in problems]
