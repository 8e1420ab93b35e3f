"""Run history in SQLite: one row per run, one per phase."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import NotFoundError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
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
);
CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL,
    phase TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    PRIMARY KEY (run_id, phase)
);
CREATE TABLE IF NOT EXISTS models (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    created REAL NOT NULL,
    path TEXT,
    info TEXT,
    PRIMARY KEY (name, version)
);
"""

TERMINAL = ("Completed", "Failed", "Canceled", "TimedOut")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    name: str
    status: str
    created: float
    ended: float | None
    exit_code: int | None
    run_dir: Path
    manifest: str
    git: dict
    message: str | None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    started: float
    ended: float | None


class Store:
    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        if not (home / ".gitignore").exists():
            (home / ".gitignore").write_text("*\n")  # run history never gets committed by accident
        self.db = sqlite3.connect(home / "tftrain.db", timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        """An exclusive write transaction: concurrent tftrain processes take turns."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def new_run(self, name: str, manifest: str) -> str:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (name, status, created, manifest) VALUES (?, 'Queued', ?, ?)",
                (name, time.time(), manifest),
            )
            run_id = f"{name}-{cursor.lastrowid}"
            db.execute("UPDATE runs SET run_id = ? WHERE seq = ?", (run_id, cursor.lastrowid))
        self.start_phase(run_id, "Queued")
        return run_id

    def update_run(self, run_id: str, **fields) -> None:
        if "git" in fields:
            fields["git"] = json.dumps(fields["git"])
        if "run_dir" in fields:
            fields["run_dir"] = str(fields["run_dir"])
        assignments = ", ".join(f"{key} = ?" for key in fields)
        self.db.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?", (*fields.values(), run_id))

    def start_phase(self, run_id: str, phase: str) -> None:
        now = time.time()
        with self.transaction() as db:
            db.execute("UPDATE phases SET ended = ? WHERE run_id = ? AND ended IS NULL", (now, run_id))
            db.execute("INSERT OR REPLACE INTO phases VALUES (?, ?, ?, NULL)", (run_id, phase, now))
            db.execute("UPDATE runs SET status = ? WHERE run_id = ?", (phase, run_id))

    def finish(self, run_id: str, status: str, exit_code: int, message: str | None) -> None:
        now = time.time()
        with self.transaction() as db:
            db.execute("UPDATE phases SET ended = ? WHERE run_id = ? AND ended IS NULL", (now, run_id))
            db.execute("INSERT OR REPLACE INTO phases VALUES (?, ?, ?, ?)", (run_id, status, now, now))
            db.execute(
                "UPDATE runs SET status = ?, ended = ?, exit_code = ?, message = ? WHERE run_id = ?",
                (status, now, exit_code, message, run_id),
            )

    def runs(self, limit: int = 50) -> list[RunRow]:
        rows = self.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY seq DESC LIMIT ?", (limit,))
        return [_run_row(row) for row in rows]

    def run(self, ref: str) -> RunRow:
        """A run by id, by its number, or `latest`."""
        if ref == "latest":
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY seq DESC LIMIT 1", ()
        elif ref.isdigit():
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs WHERE seq = ?", (int(ref),)
        else:
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (ref,)
        row = self.db.execute(query, args).fetchone()
        if row is None:
            raise NotFoundError(f"run {ref!r} not found in {self.home} (see `tftrain runs`)")
        return _run_row(row)

    def phases(self, run_id: str) -> list[PhaseRow]:
        rows = self.db.execute(
            "SELECT phase, started, ended FROM phases WHERE run_id = ? ORDER BY started, rowid", (run_id,)
        )
        return [PhaseRow(*row) for row in rows]


_RUN_COLUMNS = "run_id, name, status, created, ended, exit_code, run_dir, manifest, git, message"


def _run_row(row) -> RunRow:
    run_id, name, status, created, ended, exit_code, run_dir, manifest, git, message = row
    return RunRow(
        run_id, name, status, created, ended, exit_code, Path(run_dir or "."), manifest or "", json.loads(git or "{}"), message
    )
