"""Importers: another system's job definition → a tftrain.yml Draft and a report of what had no
direct equivalent. The input is only read and parsed, never executed or imported."""

from __future__ import annotations

from pathlib import Path

from runner.errors import ManifestError
from runner.importer.draft import Draft

SUFFIXES = (".py", ".ipynb", ".yml", ".yaml")


def import_azureml(path: Path, manifest_path: Path) -> Draft:
    """An Azure ML SDK v1 script or notebook, or a v2 command job YAML, as a Draft of `manifest_path`."""
    if not path.is_file():
        raise ManifestError(f"{path}: no such file")
    suffix, manifest_dir = path.suffix.lower(), manifest_path.resolve().parent
    if suffix in (".py", ".ipynb"):
        from runner.importer.azureml_py import import_python

        return import_python(path, manifest_dir)
    if suffix in (".yml", ".yaml"):
        from runner.importer.azureml_v2 import import_yaml

        return import_yaml(path, manifest_dir)
    raise ManifestError(f"{path}: expected an Azure ML job: {', '.join(SUFFIXES)}")
