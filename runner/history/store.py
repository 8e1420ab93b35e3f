"""Run history. Each run directory holds its own record (runs/ID/run.json, written from the moment
the run exists); tftrain.db (SQLite) indexes those records and the registry's versions. Every
command opens the history through `Store`: a damaged index is one line naming the file and
`tftrain doctor`, a missing one is rebuilt from the directories. Opening never acts: marking lost
the runs whose tftrain is gone (`mark_lost`) is a step the commands that judge a run's state take
(runner.targets.leftovers.reconcile, which also removes what those runs left running)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import HistoryError, NotFoundError
from runner.history.homepaths import SCHEMA_VERSION, located, migrate, run_relative
from runner.history.index import (
    BUSY_SECONDS,
    SCHEMA,
    Index,
    Rebuilt,
    damaged,
    empty_index,
    index_error,
    index_run,
    json_problems,
    read_only,
    rebuild,
    schema_problems,
    transaction,
)
from runner.history.indexfile import LOCK_NAME, SUFFIXES, check_record_dirs, locked, make_home, odd, odd_files, refused
from runner.history.newrun import discard_run_dir, highest_number, make_run_dir, release_space, reserve_space
from runner.history.owner import Owner
from runner.history.regular import kind_of
from runner.history.rows import LostRun, PhaseRow, RunRow
from runner.history.rundir import RunPaths, write_record
from runner.history.states import TERMINAL, Cause, RunStatus
from runner.history.untrusted import load_json
from runner.shared.refs import RunRef, shown

if TYPE_CHECKING:  # the run record is pydantic's: loaded when a record is read or written, not to list runs
    from runner.history.record import RunRecord

__all__ = ["TERMINAL", "LostRun", "PhaseRow", "RunRow", "RunStatus", "Store"]

DB_NAME = "tftrain.db"


class Store:
    def __init__(
        self,
        home: Path,
        notify: Callable[[str], None] | None = None,
        set_aside: str | None = None,
        reading: bool = False,
    ) -> None:
        """Open the history of `home` (nothing else: no run is judged); `notify` hears what opening
        did (an index rebuilt) and what runner.targets.leftovers.reconcile does (runs lost).
        `set_aside` (doctor): first move the index to tftrain.db.SET_ASIDE-TIME, so it is rebuilt.
        `reading` (runs, logs, metrics, models): a home with no history yet is read as an empty one,
        and nothing is made on disk (no directory, no index)."""
        self.home = home
        self.path = home / DB_NAME
        self.notify = notify or (lambda line: None)
        self.rebuilt: Rebuilt | None = None
        self.set_aside_as: list[Path] = []
        self._records: dict[str, RunRecord] = {}
        if (
            reading
            and not set_aside
            and all(kind_of(path) is None for path in (self.path, home / "runs", home / "models"))
        ):
            self.db = empty_index(self.path)
            return
        make_home(home)
        check_record_dirs(home)
        self.db = self._open(set_aside)

    # --- opening ---------------------------------------------------------------------------------
    def _open(self, set_aside: str | None = None) -> Index:
        if set_aside and odd(self.home / LOCK_NAME):  # doctor: the lock cannot be taken as it is
            self.set_aside_as += self._set_aside(("",), set_aside, LOCK_NAME)
        with locked(self.home / LOCK_NAME):
            if set_aside:
                self.set_aside_as = self._set_aside(SUFFIXES, set_aside) + self.set_aside_as
            if found := odd_files(self.path):  # never opened: a FIFO would block, a device read as noise
                raise refused(*found[0])
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            if fresh:
                self._set_aside(("-wal", "-shm"), "stale")  # an old journal must never be replayed into a new file
            elif not os.access(self.path, os.R_OK | os.W_OK):
                raise read_only(self.path, "no write permission, or immutable")
            try:
                db = Index(self.path, sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None))
            except sqlite3.Error as exc:
                raise index_error(self.path, exc) from None
            try:
                db.execute("PRAGMA journal_mode=WAL")
                self._inode = os.stat(self.path).st_ino
                with transaction(db):
                    if not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
                        for statement in SCHEMA:
                            db.execute(statement)
                        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                        self.rebuilt = rebuild(db, self.home)
                    elif problems := schema_problems(db) or json_problems(db):
                        raise self.damaged(problems[0])
                    else:
                        migrate(db, self.home)  # paths relative to the home, whichever home it was made in
            except BaseException:
                db.close()
                raise
        if self.rebuilt and not set_aside and (self.rebuilt.runs or self.rebuilt.models or self.rebuilt.problems):
            could_not = len(self.rebuilt.problems)
            self.notify(
                f"{self.path} was missing: rebuilt it from {self.rebuilt.summary()}"
                + (f" ({could_not} left out: see `tftrain doctor`)" if could_not else "")
            )
        return db

    def damaged(self, reason: str) -> HistoryError:
        return damaged(self.path, reason)

    def _set_aside(self, suffixes: tuple[str, ...], label: str, name: str = DB_NAME) -> list[Path]:
        """Rename NAME{suffix} (tftrain.db and its -wal, -shm) to NAME.LABEL-TIME{suffix}; nothing
        is deleted, nothing opened (a FIFO or a device is moved as it is)."""
        base = f"{name}.{label}-{time.strftime('%Y%m%d-%H%M%S')}"
        taken = set(os.listdir(self.home))
        number = 1
        while any(f"{base}{'' if number == 1 else f'.{number}'}{suffix}" in taken for suffix in suffixes):
            number += 1  # an earlier one set aside in the same second: never replaced
        base += "" if number == 1 else f".{number}"
        moved = []
        for suffix in suffixes:
            source = self.home / (name + suffix)
            if kind_of(source) is not None:
                target = self.home / f"{base}{suffix}"
                try:
                    os.replace(source, target)
                except OSError as exc:
                    why = f"cannot move {source} aside ({exc.strerror})"
                    fix = (
                        f"make {self.home} writable (chattr -i; chmod u+rwx) and try again, or remove {source} yourself"
                    )
                    raise HistoryError(f"{why}: {fix}") from None
                moved.append(target)
        return moved

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        """An exclusive write transaction: concurrent tftrain processes take turns."""
        self._follow()
        with transaction(self.db):
            yield self.db

    def _follow(self) -> None:
        """`tftrain doctor` (or rm) replaced the index since we opened it: use the new one."""
        try:
            same = os.stat(self.path).st_ino == self._inode
        except OSError:
            same = False
        if not same:
            self.db.close()
            self.db = self._open()

    # --- writing: run.json first (the truth), then the index ------------------------------------
    def new_run(self, name: str, manifest: str) -> str:
        """A new run and its directory: a number no run directory and no index row ever had."""
        runs = self.home / "runs"
        run_dir = None
        try:
            with self.transaction() as db:
                (seq,) = db.execute(
                    "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM runs),"
                    " (SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'runs'))"
                ).fetchone()
                run_dir = make_run_dir(runs, name, max(seq, highest_number(runs)) + 1)
                reserve_space(RunPaths(run_dir).reserve)
                now = time.time()
                from runner.history.record import Phase, RunRecord

                record = RunRecord(
                    run_id=run_dir.name,
                    name=name,
                    status=RunStatus.QUEUED,
                    created=now,
                    manifest=_json_object(manifest),
                    owner=Owner.me().as_dict(),
                    phases=[Phase(phase=RunStatus.QUEUED, started=now)],
                )
                self._write(run_dir, record)
                index_run(db, run_dir, record)
        except BaseException:
            if run_dir is not None:
                discard_run_dir(run_dir)  # it never became a run: nothing ran, nothing was recorded
            raise
        return run_dir.name

    def update_run(self, run_id: str, **fields) -> None:
        """Add fields (git, model, metrics, …) to the run's record."""
        fields.pop("run_dir", None)  # where the record is, is where the run is
        from runner.history.record import RunRecord

        self._change(run_id, lambda record: RunRecord.model_validate({**dict(record), **fields}))

    def start_phase(self, run_id: str, phase: RunStatus, at: float | None = None, reason: str | None = None) -> None:
        """`phase` begins (at `at`, a time.time() taken when it did, where it is written later);
        `reason`: why the run waits in it. The open phase again, with a reason: only that changes."""

        def change(record: RunRecord) -> RunRecord:
            if not (reason and record.phases and record.phases[-1].phase == phase and record.phases[-1].ended is None):
                record.add_phase(RunStatus(phase), ended=False, now=at)
            record.status = RunStatus(phase)
            record.waits(reason)
            return record

        self._change(run_id, change)

    def finish(
        self, run_id: str, status: RunStatus, exit_code: int, message: str | None, cause: Cause | None = None
    ) -> None:
        """The run's end; the space held for this is given back first, so a full disk can record it.
        `cause`: why it ended from outside its script (a sweep's early termination), as data."""
        release_space(RunPaths(self._run_dir(run_id)).reserve)
        self._change(run_id, lambda record: _finish(record, status, exit_code, message, cause))

    def _change(self, run_id: str, change: Callable[[RunRecord], RunRecord]) -> None:
        run_dir = self._run_dir(run_id)
        with self.transaction() as db:
            record = change(self._read(run_dir))
            self._write(run_dir, record)
            index_run(db, run_dir, record)

    def _run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def _read(self, run_dir: Path) -> RunRecord:
        try:
            from runner.history.record import RunRecord

            return RunRecord.read(run_dir / "run.json")
        except (OSError, ValueError):
            record = self._records.get(run_dir.name)
            if record is None:
                raise HistoryError(f"{run_dir / 'run.json'} cannot be read: the run's record is gone") from None
            return record.model_copy(deep=True)

    def _write(self, run_dir: Path, record: RunRecord) -> None:
        write_record(run_dir / "run.json", record.as_dict())
        self._records[run_dir.name] = record

    # --- runs whose tftrain is gone -------------------------------------------------------------
    def mark_lost(self) -> list[LostRun]:
        """Mark Failed (cause: lost) the unfinished runs whose owner (pid and start time) is gone
        from this machine. What they left running is not this layer's to remove: the caller
        (runner.targets.leftovers.reconcile) is told which runs they were."""
        placeholders = ", ".join("?" for _ in TERMINAL)
        rows = self.db.execute(
            f"SELECT run_id, run_dir, manifest FROM runs WHERE status NOT IN ({placeholders})", TERMINAL
        )
        lost = []
        for run_id, stored, manifest in rows:
            run_dir = self.located_run(run_id, stored)
            owner = _owner(run_dir)
            if owner is None or not owner.gone():
                continue
            message = f"lost: tftrain process {owner.pid} ended"  # for people; the record's `cause` says it
            with self.transaction() as db:
                record = self._read(run_dir)
                if record.finished:  # another command got here first
                    continue
                _finish(record, RunStatus.FAILED, 1, message, cause=Cause.LOST)
                self._write(run_dir, record)
                index_run(db, run_dir, record)
            release_space(RunPaths(run_dir).reserve)
            lost.append(LostRun(run_id, manifest, message))
        return lost

    # --- reading ---------------------------------------------------------------------------------
    def runs(self, limit: int = 50) -> list[RunRow]:
        """The newest `limit` runs; a limit past what SQLite holds, or below 0, is no limit."""
        limit = limit if 0 <= limit < 2**63 else -1
        rows = self.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY seq DESC LIMIT ?", (limit,))
        return [self._run_row(row) for row in rows]

    def run(self, ref: str) -> RunRow:
        """A run by id, by its number, or `latest`."""
        parsed = RunRef.parse(ref)  # runner.shared.refs: a number no run can have names nothing
        if parsed.latest:
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY seq DESC LIMIT 1", ()
        elif parsed.number is not None:
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs WHERE seq = ?", (parsed.number,)
        else:
            query, args = f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (parsed.run_id,)
        row = None if parsed.names_nothing else self.db.execute(query, args).fetchone()
        if row is None:
            raise NotFoundError(f"run {shown(ref)} not found in {self.home} (see `tftrain runs`)")
        return self._run_row(row)

    def phases(self, run_id: str) -> list[PhaseRow]:
        rows = self.db.execute(
            "SELECT phase, started, ended FROM phases WHERE run_id = ? ORDER BY started, rowid", (run_id,)
        )
        return [
            PhaseRow(self._status(phase, f"phases.phase of {run_id}"), started, ended) for phase, started, ended in rows
        ]

    def _run_row(self, row) -> RunRow:
        run_id, name, status, created, ended, exit_code, run_dir, manifest, git, message = row
        try:
            git = load_json(git or "{}", f"runs.git of {run_id}")
        except ValueError as exc:
            raise self.damaged(str(exc)) from None
        status = self._status(status, f"runs.status of {run_id}")
        return RunRow(
            run_id,
            name,
            status,
            created,
            ended,
            exit_code,
            self.located_run(run_id, run_dir),
            manifest or "",
            git,
            message,
        )

    def located_run(self, run_id: str, stored: str | None) -> Path:
        """The run's directory in this home, whatever home the index was made in (runner.history.index.located)."""
        return located(self.home, stored, run_relative(run_id), f"runs.run_dir of {run_id}")

    def _status(self, value: str, where: str) -> RunStatus:
        try:
            return RunStatus(value)
        except ValueError:
            raise self.damaged(f"unknown status {value!r} in {where}") from None


_RUN_COLUMNS = "run_id, name, status, created, ended, exit_code, run_dir, manifest, git, message"


# --- records ---------------------------------------------------------------------------------------
def _finish(
    record: RunRecord, status: RunStatus, exit_code: int, message: str | None, cause: Cause | None = None
) -> RunRecord:
    status = RunStatus(status)
    now = record.add_phase(status, ended=True)
    record.status, record.ended, record.exit_code, record.message, record.cause = status, now, exit_code, message, cause
    return record


def _owner(run_dir: Path) -> Owner | None:
    try:
        from runner.history.record import RunRecord

        return Owner.of(RunRecord.read(run_dir / "run.json").owner)
    except (OSError, ValueError):
        return None  # a record written before owners were recorded: nothing to judge by


def _json_object(text: str) -> dict:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("the manifest must be a JSON object")
    return value

    # a filesystem that cannot hold space ahead: the run goes on without a reserve
