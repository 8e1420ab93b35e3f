"""The embedded model registry: NAME v1, v2, … with checksums, metrics and lineage."""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.checksums import format_sums, mismatches, parse_sums, sums_of
from runner.errors import NotFoundError, RegistryError
from runner.store import Store

REF = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<version>v\d+|latest))?$")


@dataclass(frozen=True)
class ModelVersion:
    name: str
    version: int
    run_id: str | None
    created: float
    path: Path
    info: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name}@v{self.version}"

    @property
    def files_dir(self) -> Path:
        return self.path / "model"


class Registry:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.root = store.home / "models"

    def register(self, name: str, source: Path, run_id: str | None, info: dict) -> ModelVersion:
        if not source.exists():
            raise RegistryError(f"model path {source} does not exist")
        version = self._reserve(name, run_id)
        target = self.root / name / f"v{version}"
        try:
            copy_model(source, target / "model")
            sums = sums_of(target / "model")
            (target / "SHA256SUMS").write_text(format_sums(sums))
            info = {
                **info,
                "files": len(sums),
                "bytes": sum((target / "model" / name).stat().st_size for name in sums),
                "source": str(source),
                "layout": "directory" if source.is_dir() else "file",
            }
            (target / "version.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            self.store.db.execute("DELETE FROM models WHERE name = ? AND version = ?", (name, version))
            raise
        self.store.db.execute(
            "UPDATE models SET state = 'ready', path = ?, info = ? WHERE name = ? AND version = ?",
            (str(target), json.dumps(info), name, version),
        )
        return self.get(name, version)

    def _reserve(self, name: str, run_id: str | None) -> int:
        """Take the next version number inside one exclusive transaction: never handed out twice."""
        with self.store.transaction() as db:
            (latest,) = db.execute("SELECT COALESCE(MAX(version), 0) FROM models WHERE name = ?", (name,)).fetchone()
            db.execute(
                "INSERT INTO models (name, version, state, run_id, created) VALUES (?, ?, 'pending', ?, ?)",
                (name, latest + 1, run_id, time.time()),
            )
        return latest + 1

    def versions(self, name: str | None = None) -> list[ModelVersion]:
        query = f"SELECT {_COLUMNS} FROM models WHERE state = 'ready'"
        args: tuple = ()
        if name:
            query, args = query + " AND name = ?", (name,)
        rows = self.store.db.execute(query + " ORDER BY name, version", args)
        return [_version(row) for row in rows]

    def get(self, name: str, version: int | None = None) -> ModelVersion:
        query = f"SELECT {_COLUMNS} FROM models WHERE state = 'ready' AND name = ?"
        if version is None:
            row = self.store.db.execute(query + " ORDER BY version DESC LIMIT 1", (name,)).fetchone()
        else:
            row = self.store.db.execute(query + " AND version = ?", (name, version)).fetchone()
        if row is None:
            which = f"{name}@v{version}" if version else name
            raise NotFoundError(f"model {which} is not registered (see `tftrain models`)")
        return _version(row)

    def resolve(self, ref: str) -> ModelVersion:
        return self.get(*parse_ref(ref))

    def pull(self, ref: str, out_dir: Path) -> ModelVersion:
        model = self.resolve(ref)
        verify(model)
        if out_dir.exists() and any(out_dir.iterdir()):
            raise RegistryError(f"{out_dir} exists and is not empty; choose an empty or new directory")
        shutil.copytree(model.files_dir, out_dir, dirs_exist_ok=True)
        problems = mismatches(out_dir, parse_sums((model.path / "SHA256SUMS").read_text()))
        if problems:
            raise RegistryError(f"{model.label} copied to {out_dir} does not match its checksums: {problems[0]}")
        return model


def parse_ref(ref: str) -> tuple[str, int | None]:
    """NAME, NAME@vN or NAME@latest → (name, N or None for the latest)."""
    match = REF.match(ref)
    if not match:
        raise NotFoundError(f"{ref!r} is not a model reference: use NAME, NAME@vN or NAME@latest")
    version = match["version"]
    return match["name"], (int(version[1:]) if version and version != "latest" else None)


def verify(model: ModelVersion) -> None:
    problems = mismatches(model.files_dir, parse_sums((model.path / "SHA256SUMS").read_text()))
    if problems:
        raise RegistryError(f"{model.label} in the registry is damaged: {'; '.join(problems[:3])}")


def copy_model(source: Path, target: Path) -> Path:
    """Copy a model (a directory, or one file) into `target`, links followed; returns the path
    with the model's shape: `target` itself, or the one file in it."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=False)
        return target
    target.mkdir(parents=True)
    return Path(shutil.copy2(source, target / source.name))


_COLUMNS = "name, version, run_id, created, path, info"


def _version(row) -> ModelVersion:
    name, version, run_id, created, path, info = row
    return ModelVersion(name, version, run_id, created, Path(path), json.loads(info or "{}"))
