"""The embedded model registry: NAME v1, v2, … with checksums, metrics and lineage.

A version is TFTRAIN_HOME/models/NAME/vN: model/ (the files), SHA256SUMS (of every file in
model/) and version.json (name, version, run_id, created, and the rest of the row's info: enough
to rebuild the database's models table from the directories). Only regular files and
directories are registered: symlinks, FIFOs, devices, sockets and unreadable entries under the
model path are skipped, never opened, and listed in version.json under "skipped".

Nothing registered is ever overwritten: a version number is past both the database's and the
directories' highest, the version is written into a fresh directory beside it and renamed into
place once complete, and a failure removes only what the call made. Reading a version (pull,
resume_from: model:) copies it out and holds it to the same rules: anything in model/ that is
not a regular file or directory, or that SHA256SUMS does not cover, means it is damaged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import NotFoundError, RegistryError
from runner.history.checksums import (
    Copied,
    EntryKind,
    Skipped,
    copy_file,
    copy_tree,
    fresh_dir,
    kind_of,
    mismatches,
    read_sums,
    skipped_note,
    write_sums,
    writing,
)
from runner.history.homepaths import located, version_relative
from runner.history.store import Store
from runner.history.untrusted import load_json
from runner.shared.refs import SHOWN_CHARS, ModelRef, number_left, version_of_dir

SUMS = "SHA256SUMS"
# (the version being made, SHA256SUMS of its model/, its extras' sha256) → what version.json adds
Sealing = Callable[[Path, dict[str, str], dict[str, str]], dict]


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

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """What was under the model path but not registered (links, FIFOs, devices, …)."""
        return tuple(Skipped.from_json(item) for item in self.info.get("skipped", []))

    def skipped_note(self, where: str) -> str | None:
        return skipped_note(self.skipped, where) if self.skipped else None


class Registry:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.root = store.home / "models"

    def register(
        self,
        name: str,
        source: Path,
        run_id: str | None,
        info: dict,
        extras: dict[str, Path] | None = None,
        seal: Sealing | None = None,
        withheld: frozenset[str] = frozenset(),
    ) -> ModelVersion:
        """`extras`: files kept beside model/ (the gate's serving/ files, model.onnx), by their path in
        the version; their sha256 go into version.json's "extras". `seal` (runner.history.sealing)
        writes the provenance and the signature into the version before it takes its name.
        `withheld`: files under `source` (relative) that hold a secret's value: skipped, listed."""
        top = kind_of(source)
        if top is None:
            raise RegistryError(f"model path {source} does not exist")
        if top not in (EntryKind.FILE, EntryKind.DIRECTORY):
            raise RegistryError(
                f"model path {source} is {top.described}: only a regular file or a directory is registered"
            )
        with writing(self.root / name):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        version, created = self._reserve(name, run_id)
        try:
            with fresh_dir(self.root / name / f"v{version}") as staging:
                record = {**info, "name": name, "version": version, "run_id": run_id, "created": created}
                record = _write_version(staging, source, top, record, extras or {}, seal, withheld)
        except BaseException:
            self.store.db.execute(
                "DELETE FROM models WHERE name = ? AND version = ? AND state = 'pending'", (name, version)
            )
            raise
        self.store.db.execute(
            "UPDATE models SET state = 'ready', path = ?, info = ? WHERE name = ? AND version = ?",
            ("/".join(version_relative(name, version)), json.dumps(record), name, version),
        )
        return self.get(name, version)

    def _reserve(self, name: str, run_id: str | None) -> tuple[int, float]:
        """Take the next version number inside one exclusive transaction: never handed out twice,
        and never one whose directory exists (a database lost or rebuilt forgets versions; the
        directories do not)."""
        created = time.time()
        with self.store.transaction() as db:
            (latest,) = db.execute("SELECT COALESCE(MAX(version), 0) FROM models WHERE name = ?", (name,)).fetchone()
            version = max(latest, self._highest_on_disk(name)) + 1
            if not number_left(version):
                raise RegistryError(f"model {name}: no version number is left after v{version - 1}")
            db.execute(
                "INSERT INTO models (name, version, state, run_id, created) VALUES (?, ?, 'pending', ?, ?)",
                (name, version, run_id, created),
            )
        return version, created

    def _highest_on_disk(self, name: str) -> int:
        try:
            names = os.listdir(self.root / name)
        except FileNotFoundError:
            return 0
        return max((version_of_dir(name) or 0 for name in names), default=0)

    def versions(self, name: str | None = None) -> list[ModelVersion]:
        query = f"SELECT {_COLUMNS} FROM models WHERE state = 'ready'"
        args: tuple = ()
        if name:
            query, args = query + " AND name = ?", (name,)
        rows = self.store.db.execute(query + " ORDER BY name, version", args)
        return [self._version(row) for row in rows]

    def get(self, name: str, version: int | None = None) -> ModelVersion:
        query = f"SELECT {_COLUMNS} FROM models WHERE state = 'ready' AND name = ?"
        if version is None:
            row = self.store.db.execute(query + " ORDER BY version DESC LIMIT 1", (name,)).fetchone()
        else:
            row = self.store.db.execute(query + " AND version = ?", (name, version)).fetchone()
        if row is None:
            which = f"{name}@v{version}" if version else name
            which = which if len(which) <= SHOWN_CHARS else which[:SHOWN_CHARS] + "…"  # one line, however long the name
            raise NotFoundError(f"model {which} is not registered (see `tftrain models`)")
        return self._version(row)

    def _version(self, row) -> ModelVersion:
        name, version, run_id, created, path, info = row
        try:
            info = load_json(info or "{}", f"models.info of {name}@v{version}")
        except ValueError as exc:
            raise self.store.damaged(str(exc)) from None
        path = located(self.store.home, path, version_relative(name, version), f"models.path of {name}@v{version}")
        return ModelVersion(name, version, run_id, created, path, info)

    def resolve(self, ref: str) -> ModelVersion:
        return self.get(*parse_ref(ref))

    def pull(self, ref: str, out_dir: Path) -> ModelVersion:
        """Copy NAME@vN into out_dir (new, or an empty directory), verified as it is copied."""
        model = self.resolve(ref)
        refuse_filled(out_dir)
        checkout(model, out_dir)
        return model


def refuse_filled(out_dir: Path) -> None:
    """RegistryError unless `out_dir` (where a version is to be copied) is new or an empty directory."""
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise RegistryError(f"{out_dir} exists and is not empty; choose an empty or new directory")


def _write_version(
    staging: Path,
    source: Path,
    top: EntryKind,
    record: dict,
    extras: dict[str, Path],
    seal: Sealing | None,
    withheld: frozenset[str],
) -> dict:
    """model/, SHA256SUMS, the extras and version.json of a new version, in `staging`; the full record."""
    files = staging / "model"
    files.mkdir()
    copied = copy_tree(source, files, withheld)
    if top is EntryKind.FILE and not copied.sums:
        secret = any(item.kind is EntryKind.SECRET for item in copied.skipped)
        raise RegistryError(
            f"model path {source} " + ("holds a secret's value: it is not registered" if secret else "cannot be read")
        )
    write_sums(staging / SUMS, copied.sums)
    kept = {}
    for relative, path in sorted(extras.items()):
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        done = copy_file(path, staging / relative)
        if not isinstance(done, tuple):
            raise RegistryError(f"{path} is {done.described}: it cannot be kept with the model")
        kept[relative] = done[0]
    if kept:
        record = {**record, "extras": kept}
    if seal is not None:
        record = {**record, **seal(staging, copied.sums, kept)}
    record = {
        **record,
        "files": len(copied.sums),
        "bytes": copied.bytes,
        "source": str(source),
        "layout": "directory" if top is EntryKind.DIRECTORY else "file",
        "skipped": [item.as_json() for item in copied.skipped],
    }
    with writing(staging / "version.json"):
        (staging / "version.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def checkout(model: ModelVersion, out_dir: Path) -> Path:
    """Copy a registered version's files into out_dir (absent, or an empty directory), checking
    every file against SHA256SUMS as it is read; RegistryError "model NAME@vN is damaged: …" when
    anything does not match, and nothing is left in out_dir. Returns the model's path there: the
    directory, or the one file of a single-file model."""
    expected = _expected_sums(model)
    with fresh_dir(out_dir) as staging:
        copied = copy_tree(model.files_dir, staging)
        _check(model, copied, expected)
    if model.info.get("layout") == "file" and len(copied.sums) == 1:
        return out_dir / next(iter(copied.sums))
    return out_dir


def checkout_version(model: ModelVersion, root: Path) -> None:
    """Copy a whole version into root (absent, or an empty directory): model/ as `checkout` does,
    and the files kept beside it (the gate's serving/ and model.onnx), each checked against the
    sha256 version.json lists for it. RegistryError "model NAME@vN is damaged: …" otherwise."""
    checkout(model, root / "model")
    for relative, digest in sorted((model.info.get("extras") or {}).items()):
        parts = Path(relative).parts
        if Path(relative).is_absolute() or ".." in parts or not parts or parts[0] == "model":
            raise damaged(model, f"version.json names {relative!r} outside the version")
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        copied = copy_file(model.path / relative, target)
        if not isinstance(copied, tuple) or copied[0] != digest:
            state = copied.described if not isinstance(copied, tuple) else "not what version.json says (sha256 differs)"
            raise damaged(model, f"{relative} is {state}")


def _expected_sums(model: ModelVersion) -> dict[str, str]:
    for path in (model.path, model.files_dir):
        kind = kind_of(path)
        if kind is not EntryKind.DIRECTORY:
            raise damaged(model, f"{path} is {'missing' if kind is None else kind.described}")
    try:
        return read_sums(model.path / SUMS)
    except (OSError, ValueError) as exc:
        raise damaged(
            model, f"{exc}" if isinstance(exc, ValueError) else f"{SUMS} cannot be read ({exc.strerror})"
        ) from None


def _check(model: ModelVersion, copied: Copied, expected: dict[str, str]) -> None:
    problems = [f"{item.path} is {item.kind.described}" for item in copied.skipped]
    problems += mismatches(copied.sums, expected)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise damaged(model, "; ".join(problems[:3]) + more)


def damaged(model: ModelVersion, problem: str) -> RegistryError:
    return RegistryError(f"model {model.label} is damaged: {problem}")


def parse_ref(ref: str) -> tuple[str, int | None]:
    """NAME, NAME@vN or NAME@latest → (name, N or None for the latest), as runner.shared.refs
    parses every reference: NotFoundError for one that names no version there can be."""
    parsed = ModelRef.parse(ref)
    return parsed.name, parsed.version


_COLUMNS = "name, version, run_id, created, path, info"
