"""What both importers' contexts share: the draft, the manifest's folder, paths as seen from it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.importer.draft import Draft


def relative(path: Path, folder: Path) -> str:
    """`path` as seen from `folder`, with forward slashes: how manifests and reports write paths."""
    return Path(os.path.relpath(path, folder)).as_posix()


@dataclass
class ImportContext:
    draft: Draft
    manifest_dir: Path  # resolved
    input_dir: Path  # the folder of the file being imported, resolved

    def where(self, at: Any) -> str:
        """`at` (a line, a YAML key: what the importer knows) as `file:line`."""
        raise NotImplementedError

    def shown(self, value: Any) -> str:
        return repr(value)

    def unresolved(self, path: str | tuple[str, ...], value: Any, at: Any, placeholder: Any = None) -> None:
        self.draft.unresolved(path, self.shown(value), self.where(at), placeholder)

    def relative(self, path: Path) -> str:
        return relative(path, self.manifest_dir)

    def source_dir(self) -> Path | None:
        folder = self.draft.get("source_directory")
        return (self.manifest_dir / folder).resolve() if isinstance(folder, str) else None
