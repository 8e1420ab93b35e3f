"""Leases: which job holds which GPUs and CPU slots of which host, so two jobs never get the
same GPU. One SQLite file in the pool's state directory, shared by every tftrain process that
dispatches to the pool; every decision is one exclusive transaction.

A lease lives while its holder renews it (a heartbeat thread), and is released when the job
ends. A holder that dies stops renewing: its leases expire after the pool's lease_ttl_seconds,
at once when the holder ran on this machine and its process is gone. Jobs that do not fit wait
in a queue table, which gives them a position.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import PlacementError
from runner.targets.pool.schedule import Assignment, Capacity, Placement

BUSY_SECONDS = 30  # how long a decision waits for another process's (each is short)
SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    job TEXT NOT NULL, host TEXT NOT NULL, gpu INTEGER, cpus INTEGER NOT NULL,
    holder_node TEXT NOT NULL, holder_pid INTEGER NOT NULL, renewed REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS queue (
    job TEXT PRIMARY KEY, enqueued REAL NOT NULL, holder_node TEXT NOT NULL, holder_pid INTEGER NOT NULL,
    renewed REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Attempt:
    placement: Placement
    position: int  # 1 = first in the queue; 0 once placed


def _lock_file(path: Path) -> int:
    """A descriptor of the lock file beside the leases: made owner-only where missing, refused
    (OSError) where it is a link."""
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class Leases:
    def __init__(self, state_dir: Path, ttl: float) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "leases.db"
        self.ttl = ttl
        self.node = socket.gethostname()
        self.lock = threading.Lock()
        # Two jobs opening a fresh file at once (a sweep's trials) collided switching it to WAL:
        # 'database is locked' at once, no busy wait. Opening is serialised by a lock file beside it.
        # The lock file is opened, never followed: a link planted in a shared state directory
        # makes no file elsewhere (ELOOP is one line, as any other failure here).
        with self._failures(), open(_lock_file(state_dir / "leases.db.lock"), "rb") as opening:
            fcntl.flock(opening, fcntl.LOCK_EX)
            self.db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses at most the last lease, never the file
            self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _failures(self):
        """A leases file that cannot be opened or written (damaged, locked too long, a full disk) is
        one line naming it (exit 19), not a database traceback."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise PlacementError(f"pool leases {self.path}: {exc}") from None

    @contextmanager
    def _transaction(self):
        with self.lock, self._failures():
            self.db.execute("BEGIN EXCLUSIVE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def try_place(self, job: str, hosts: list[Capacity], decide: Callable[[list[Capacity]], Placement]) -> Attempt:
        """Place `job` against what the other jobs hold now; on success its leases are taken in
        the same transaction. On failure it keeps (or takes) its place in the queue."""
        now = time.time()
        with self._transaction() as db:
            self._expire(db, now)
            placement = decide(self._held(db, hosts))
            if placement.placed:
                db.executemany(
                    "INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [row for item in placement.assignments for row in self._rows(job, item, now)],
                )
                db.execute("DELETE FROM queue WHERE job = ?", (job,))
                return Attempt(placement, 0)
            db.execute(
                "INSERT INTO queue VALUES (?, ?, ?, ?, ?) ON CONFLICT(job) DO UPDATE SET renewed = excluded.renewed",
                (job, now, self.node, os.getpid(), now),
            )
            (position,) = db.execute(
                "SELECT COUNT(*) FROM queue WHERE enqueued <= (SELECT enqueued FROM queue WHERE job = ?)", (job,)
            ).fetchone()
            return Attempt(placement, position)

    def _rows(self, job: str, item: Assignment, now: float) -> list[tuple]:
        holder = (self.node, os.getpid(), now)
        rows = [(job, item.host, gpu, 0, *holder) for gpu in item.gpu_ids]
        if item.cpus or not item.gpu_ids:
            rows.append((job, item.host, None, item.cpus, *holder))
        return rows

    def _held(self, db, hosts: list[Capacity]) -> list[Capacity]:
        gpus: dict[str, set[int]] = {}
        cpus: dict[str, int] = {}
        for host, gpu, count in db.execute("SELECT host, gpu, cpus FROM leases"):
            if gpu is not None:
                gpus.setdefault(host, set()).add(gpu)
            cpus[host] = cpus.get(host, 0) + count
        return [host.take(tuple(gpus.get(host.name, ())), cpus.get(host.name, 0)) for host in hosts]

    def _expire(self, db, now: float) -> None:
        for table in ("leases", "queue"):
            stale = [
                (job, pid)
                for job, node, pid, renewed in db.execute(f"SELECT job, holder_node, holder_pid, renewed FROM {table}")
                if renewed + self.ttl < now or (node == self.node and not _alive(pid))
            ]
            db.executemany(f"DELETE FROM {table} WHERE job = ? AND holder_pid = ?", stale)

    def renew(self, job: str) -> None:
        now = time.time()
        with self._transaction() as db:
            db.execute("UPDATE leases SET renewed = ? WHERE job = ?", (now, job))
            db.execute("UPDATE queue SET renewed = ? WHERE job = ?", (now, job))

    def release(self, job: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM leases WHERE job = ?", (job,))
            db.execute("DELETE FROM queue WHERE job = ?", (job,))

    def holders(self) -> dict[str, list[tuple[str, int | None, int]]]:
        """host → (job, gpu, cpus) of the live leases (for `tftrain pool status`)."""
        with self._transaction() as db:
            self._expire(db, time.time())
            rows = db.execute("SELECT host, job, gpu, cpus FROM leases ORDER BY job").fetchall()
        held: dict[str, list] = {}
        for host, job, gpu, cpus in rows:
            held.setdefault(host, []).append((job, gpu, cpus))
        return held


class Heartbeat:
    """Renews a job's leases (and queue place) every ttl/4 seconds until stopped."""

    def __init__(self, leases: Leases, job: str) -> None:
        self.leases, self.job = leases, job
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=f"lease-{job}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def _beat(self) -> None:
        while not self.stopped.wait(self.leases.ttl / 4):
            try:
                self.leases.renew(self.job)
            except sqlite3.Error:
                pass  # a busy database: the next beat renews; the ttl allows three misses

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
