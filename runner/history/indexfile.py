"""The index's files on disk (tftrain.db, its -wal and -shm, history.lock), told apart by lstat
and stat alone, and `inspect`, doctor's look at the index.

A FIFO, a device, a directory, a socket or a link to any of those (or to nothing) where SQLite
expects a file is never opened: opening a FIFO for writing blocks until a reader comes, reading
one blocks forever, a link to /dev/urandom or /dev/null reads as noise or as an empty database
that never keeps a lock. Such an entry is "odd": every command refuses it in one line naming it
and `tftrain doctor`; doctor renames it aside (a rename opens nothing) and rebuilds. A regular
file, or a link to one, is what SQLite opens.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from runner.errors import HistoryError
from runner.history.homepaths import path_problems
from runner.history.index import BUSY_SECONDS, damaged, json_problems, record_problems, schema_problems
from runner.history.regular import EntryKind, kind_of
from runner.history.rundir import space_error

LOCK_NAME = "history.lock"  # flock'd while the index is created, checked, set aside or rebuilt
RECORD_DIRS = ("runs", "models")  # the truth the index is rebuilt from
SUFFIXES = ("", "-wal", "-shm")  # the database and the two files SQLite keeps beside it in WAL mode


def odd(path: Path, want: EntryKind = EntryKind.FILE) -> str | None:
    """What makes `path` unusable as the file SQLite or flock opens (or the directory `want`s),
    told without opening it ("a FIFO, not a file", "a symlink to a character device
    ('/dev/urandom'), not a file"), or None: nothing there, what is wanted, or a link to one."""
    noun = "file" if want is EntryKind.FILE else want.value
    kind = kind_of(path)
    if kind in (None, want):
        return None
    if kind is not EntryKind.SYMLINK:
        return f"{kind.described}, not a {noun}"
    try:
        target = repr(os.readlink(path))
    except OSError as exc:
        return f"a symlink that cannot be read ({exc.strerror}), not a {noun}"
    try:
        followed = EntryKind.of(os.stat(path).st_mode)
    except FileNotFoundError:
        return f"a symlink to nothing ({target}), not a {noun}"  # SQLite would create the file where it points
    except OSError as exc:
        return f"a symlink that cannot be followed ({exc.strerror}), not a {noun}"
    return None if followed is want else f"a symlink to {followed.described} ({target}), not a {noun}"


def check_record_dirs(home: Path) -> None:
    """runs/ and models/ hold the records the index is made from: one that is not a directory
    (a FIFO, a file, a link to a device) is one line; nothing can rebuild it, so nothing moves it."""
    for name in RECORD_DIRS:
        if why := odd(home / name, EntryKind.DIRECTORY):
            raise HistoryError(
                f"{home / name} is {why}: the run history keeps its {name} there; move it away, or put the directory"
                " back"
            )


def odd_files(database: Path) -> list[tuple[Path, str]]:
    """The odd ones among the database and its -wal and -shm, with what each is."""
    found = [(Path(f"{database}{suffix}"), odd(Path(f"{database}{suffix}"))) for suffix in SUFFIXES]
    return [(path, why) for path, why in found if why]


def refused(path: Path, why: str) -> HistoryError:
    """The one line every command gives, as for any other damage: doctor sets the file aside."""
    return damaged(path, why)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """history.lock held (flock) while the index is created, checked, set aside or rebuilt."""
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file opened, created if missing; never blocking on what is not a regular file
    (O_NONBLOCK: a FIFO without a reader fails at once; fstat catches one swapped in)."""
    if why := odd(path):
        raise refused(path, why)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise space_error(exc, path) or HistoryError(f"cannot open {path} ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refused(path, "not a regular file")
    return fd


def inspect(path: Path) -> list[str]:
    """What makes the index unusable: empty when it is usable, or missing (then it is rebuilt).
    Odd files are named before anything is opened."""
    lock = path.parent / LOCK_NAME
    found = odd_files(path) + ([(lock, why)] if (why := odd(lock)) else [])
    if found:
        return [why if odd_path == path else f"{odd_path.name} is {why}" for odd_path, why in found]
    if not path.exists() or path.stat().st_size == 0:
        return []
    if not os.access(path, os.R_OK | os.W_OK):
        return ["read-only (chmod u+rw; chattr -i)"]
    try:
        db = sqlite3.connect(path, timeout=BUSY_SECONDS)
        try:
            checks = [row[0] for row in db.execute("PRAGMA integrity_check(10)")]
            if checks != ["ok"]:
                return [f"integrity_check: {check}" for check in checks]
            return (
                schema_problems(db)
                or json_problems(db, limit=10)
                or record_problems(db)
                or path_problems(db, path.parent)
            )
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]


def make_home(home: Path) -> None:
    """The history's directory, with a .gitignore so that it is never committed by accident."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        if kind_of(home / ".gitignore") is None:  # not even a link (writing would follow it out of home)
            # O_EXCL; a concurrent tftrain (a sweep's trial) may make it first
            with suppress(FileExistsError), open(home / ".gitignore", "x") as handle:
                handle.write("*\n")
    except OSError as exc:
        error = space_error(exc, home) or HistoryError(f"cannot use {home} for the run history ({exc.strerror or exc})")
        raise error from None
