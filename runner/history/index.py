"""The history index (tftrain.db) as derived data: its schema, its rows made from the records in
the directories (runs/ID/run.json, models/NAME/vN/version.json), rebuilding it from them, and the
checks that tell a usable index from a damaged one, and the connection that turns every SQLite
error into one line. The directories are the source of truth."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from runner.errors import DiskFullError, FatalError, HistoryError
from runner.history.homepaths import REBUILD_HINT, damaged, run_relative, version_relative
from runner.history.recordchecks import RECORD_CHECKS, is_phase, is_time
from runner.history.rundir import read_record
from runner.history.states import TERMINAL
from runner.history.untrusted import load_json, read_yaml
from runner.shared.refs import run_number, version_of_dir

if TYPE_CHECKING:
    from runner.history.record import RunRecord

BUSY_SECONDS = 60
SQLITE_BUSY, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL = 5, 8, 10, 13

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    ended REAL,
    exit_code INTEGER,
    run_dir TEXT,
    manifest TEXT,
    git TEXT,
    message TEXT
)""",
    """CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL,
    phase TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    PRIMARY KEY (run_id, phase)
)""",
    """CREATE TABLE IF NOT EXISTS models (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    created REAL NOT NULL,
    path TEXT,
    info TEXT,
    PRIMARY KEY (name, version)
)""",
)
COLUMNS = {
    "runs": (
        "seq",
        "run_id",
        "name",
        "status",
        "created",
        "ended",
        "exit_code",
        "run_dir",
        "manifest",
        "git",
        "message",
    ),
    "phases": ("run_id", "phase", "started", "ended"),
    "models": ("name", "version", "state", "run_id", "created", "path", "info"),
}
# (table, what names a row, column): each holds a JSON object
JSON_COLUMNS = (
    ("runs", "run_id", "manifest"),
    ("runs", "run_id", "git"),
    ("models", "name || '@v' || version", "info"),
)


# --- rows from records --------------------------------------------------------------------------
def index_run(db, run_dir: Path, record: RunRecord) -> None:
    """Make the index's row and phases of one run say what its record says."""
    run_id = run_dir.name
    values = (
        record.name,
        record.status.value,
        record.created,
        record.ended,
        record.exit_code,
        "/".join(run_relative(run_id)),
        json.dumps(record.manifest),
        json.dumps(record.git),
        record.message,
    )
    if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
        db.execute(
            "UPDATE runs SET name = ?, status = ?, created = ?, ended = ?, exit_code = ?, run_dir = ?, manifest = ?,"
            " git = ?, message = ? WHERE run_id = ?",
            (*values, run_id),
        )
    else:
        seq = run_number(run_id)  # `tftrain runs show N` finds NAME-N
        if seq is not None and db.execute("SELECT 1 FROM runs WHERE seq = ?", (seq,)).fetchone():
            seq = None
        db.execute(
            "INSERT INTO runs (seq, run_id, name, status, created, ended, exit_code, run_dir, manifest, git, message)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, run_id, *values),
        )
    db.execute("DELETE FROM phases WHERE run_id = ?", (run_id,))
    for phase in record.phases:
        db.execute(
            "INSERT OR REPLACE INTO phases VALUES (?, ?, ?, ?)", (run_id, phase.phase.value, phase.started, phase.ended)
        )


def index_model(db, version_dir: Path, info: dict | None) -> None:
    """A registered version (its version.json read), or a pending one whose number stays taken."""
    name, version = version_dir.parent.name, version_of_dir(version_dir.name)
    created = info.get("created") if info else None
    if not is_time(created):
        created = version_dir.stat().st_mtime
    state, run_id = ("ready", info.get("run_id")) if info is not None else ("pending", None)
    run_id = run_id if isinstance(run_id, str) else None  # a number there would go to SQLite as one
    db.execute(
        "INSERT OR REPLACE INTO models (name, version, state, run_id, created, path, info) VALUES (?, ?, ?, ?, ?,"
        " ?, ?)",
        (
            name,
            version,
            state,
            run_id,
            created,
            "/".join(version_relative(name, version)),
            json.dumps(info) if info is not None else None,
        ),
    )


# --- rebuilding ---------------------------------------------------------------------------------
class Rebuilt(NamedTuple):
    runs: int
    phases: int
    models: int
    problems: tuple[str, ...]  # what could not be rebuilt, one line each

    def summary(self) -> str:
        return f"{plural(self.runs, 'run')} ({plural(self.phases, 'phase')}) and {plural(self.models, 'model version')}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def rebuild(db, home: Path) -> Rebuilt:
    """Fill an empty index from the run and model directories (inside the caller's transaction)."""
    problems: list[str] = []
    records = []
    for run_dir in _subdirectories(home / "runs"):
        try:
            records.append((run_dir, load_run(run_dir)))
        except (OSError, ValueError) as exc:
            problems.append(f"{run_dir}: {_reason(exc)}; not indexed (its id stays taken)")
    records.sort(key=lambda item: (run_number(item[0].name) or 0, item[1].created))
    for run_dir, record in records:
        index_run(db, run_dir, record)
    models = 0
    for name_dir in _subdirectories(home / "models"):
        for version_dir in _subdirectories(name_dir):
            if version_of_dir(version_dir.name) is None:
                problems.append(f"{version_dir}: not a version directory (vN); left alone")
                continue
            try:
                info = read_record(version_dir / "version.json")  # runner.history.untrusted: finite, bounded
                models += 1
            except (OSError, ValueError) as exc:
                info = None
                problems.append(f"{version_dir}: version.json {_reason(exc)}; kept as pending (unlisted, number taken)")
            index_model(db, version_dir, info)
    phases = sum(len(record.phases) for _, record in records)
    return Rebuilt(len(records), phases, models, tuple(problems))


def load_run(run_dir: Path) -> RunRecord:
    """run.json made complete for the index: records written before it held everything (no name,
    created or manifest) get them from the run id, the phases and manifest.lock.yml."""
    record = read_record(run_dir / "run.json")
    phases = record.get("phases") or []
    if not isinstance(phases, list) or not all(is_phase(phase) for phase in phases):
        raise ValueError("run.json: phases are not a list of {phase, started, ended}")
    manifest = record.get("manifest") or _locked_manifest(run_dir)
    if not isinstance(manifest, dict):
        raise ValueError("no manifest in run.json or manifest.lock.yml")
    status = record.get("status")
    created = record.get("created") or (phases[0]["started"] if phases else (run_dir / "run.json").stat().st_mtime)
    ended = record.get("ended")
    if ended is None and status in TERMINAL and phases:
        ended = phases[-1].get("ended")
    record = {
        **record,
        "run_id": run_dir.name,
        "name": record.get("name") or run_dir.name.rsplit("-", 1)[0],
        "created": created,
        "ended": ended,
        "manifest": manifest,
        "phases": phases,
    }
    for key, check in RECORD_CHECKS:
        if not check(record.get(key)):
            raise ValueError(f"run.json: {key} is {json.dumps(record.get(key))[:40]}")
    from pydantic import ValidationError

    from runner.history.record import RunRecord

    try:
        return RunRecord.model_validate(record)
    except ValidationError as exc:  # one line, as the checks above say it
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ValueError(f"run.json: {where}: {error['msg']}") from None


def _locked_manifest(run_dir: Path) -> dict | None:
    try:
        lock = read_yaml(run_dir / "manifest.lock.yml", "manifest.lock.yml")
    except (OSError, ValueError):
        return None
    return lock.get("manifest") if isinstance(lock, dict) else None


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(path for path in directory.iterdir() if path.is_dir() and not path.name.startswith("."))
    except FileNotFoundError:
        return []


def _reason(exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no {Path(exc.filename).name}" if exc.filename else "missing"
    if isinstance(exc, OSError):
        return f"{Path(exc.filename).name if exc.filename else 'read'}: {exc.strerror or exc}"
    return f"unreadable ({exc})"


# --- checks -------------------------------------------------------------------------------------
def schema_problems(db) -> list[str]:
    problems = []
    for table, columns in COLUMNS.items():
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not present:
            problems.append(f"no table {table}")
        elif missing := [column for column in columns if column not in present]:
            problems.append(f"table {table} has no column {', '.join(missing)}")
    return problems


def json_problems(db, limit: int = 1) -> list[str]:
    """Columns that must hold a JSON object and do not (json_type only where json_valid says so)."""
    problems = []
    for table, key, column in JSON_COLUMNS:
        rows = db.execute(
            f"SELECT {key} FROM {table} WHERE {column} IS NOT NULL"
            f" AND (CASE WHEN json_valid({column}) THEN json_type({column}) END) IS NOT 'object' LIMIT ?",
            (limit,),
        )
        problems += [f"invalid JSON in {table}.{column} of {name}" for (name,) in rows]
    return problems[:limit]


def record_problems(db, limit: int = 10) -> list[str]:
    """JSON columns SQLite takes but tftrain cannot read back (runner.history.untrusted: nested past
    its depth, lone surrogates, numbers past 64 bits): doctor's look, row by row."""
    problems = []
    for table, key, column in JSON_COLUMNS:
        for name, text in db.execute(f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL"):
            try:
                load_json(text, f"{table}.{column} of {name}")
            except ValueError as exc:
                problems.append(str(exc))
    return problems[:limit]


# --- the SQLite connection, every error one line ---------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rows:
    rows: tuple
    lastrowid: int | None
    rowcount: int

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list:
        return list(self.rows)

    def __iter__(self):
        return iter(self.rows)


class Index:
    """tftrain.db; rows are fetched inside `execute`, so a damaged page fails there, as one line."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path, self.connection = path, connection

    def execute(self, sql: str, args: tuple = ()) -> Rows:
        try:
            cursor = self.connection.execute(sql, args)
            return Rows(tuple(cursor.fetchall()), cursor.lastrowid, cursor.rowcount)
        except (sqlite3.ProgrammingError, sqlite3.IntegrityError):
            raise  # a mistake in tftrain, not in the file
        except sqlite3.Error as exc:
            raise index_error(self.path, exc) from None

    @property
    def in_transaction(self) -> bool:
        return self.connection.in_transaction

    def close(self) -> None:
        self.connection.close()


@contextmanager
def transaction(db: Index):
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite has rolled back by itself after some errors (a full disk)
            try:
                db.connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise


def index_error(path: Path, exc: sqlite3.Error) -> FatalError:
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL or (code == SQLITE_IOERR and _no_space(path)):
        return DiskFullError(f"disk full writing {path}")
    if code == SQLITE_READONLY:
        return read_only(path, str(exc))
    if code == SQLITE_BUSY:
        return HistoryError(f"{path} stayed locked by another process for {BUSY_SECONDS} s ({exc})")
    return damaged(path, str(exc))


def read_only(path: Path, reason: str) -> HistoryError:
    return HistoryError(f"{path} is read-only ({reason}): make it writable (chmod u+rw; chattr -i), or {REBUILD_HINT}")


def _no_space(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


def empty_index(path: Path) -> Index:
    """An index with no run and no model, in memory: a history that does not exist yet, read."""
    db = Index(path, sqlite3.connect(":memory:", isolation_level=None))
    for statement in SCHEMA:
        db.execute(statement)
    return db
