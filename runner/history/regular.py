"""What a path is (EntryKind, kind_of: a link is a link), and reading what a run directory holds
(run.json, version.json, a rank's log, metrics.jsonl) only when it is a regular file.

A FIFO in its place would block the reader forever (`tftrain runs show`, `tftrain logs`, doctor's
rebuild), a device would read as noise or never end. stat says what the path is before it is
opened (a link is followed: a record may be a link to a file), and fstat again after, with
O_NONBLOCK and O_NOCTTY, in case it was swapped in between.
"""

from __future__ import annotations

import errno
import os
import stat
from enum import Enum
from pathlib import Path
from typing import BinaryIO

READ_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
)  # an entry read: never a link followed, never blocked on


def open_regular(path: Path) -> BinaryIO:
    """The regular file at `path`, open for reading; OSError (EINVAL, "not a regular file") when
    it is anything else, FileNotFoundError when nothing is there."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    handle = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC), "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return handle


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`; OSError when it is anything else."""
    with open_regular(path) as handle:
        return handle.read()


class EntryKind(Enum):
    FILE = "regular file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"  # only in archives: on disk a hardlink is a regular file
    FIFO = "FIFO"
    CHARACTER_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    SOCKET = "socket"
    UNREADABLE = "unreadable"
    OTHER = "unsupported entry"
    UNSAFE_NAME = "unsafe name"  # archives: absolute, `..`, empty component, NUL
    NAME_TAKEN = "name taken"  # archives: a duplicate, or a file where a directory is expected
    SECRET = "file holding a secret's value"  # never registered or published (runner.history.secret_scan)

    @property
    def described(self) -> str:
        """'a symlink', 'an unreadable', …: for messages."""
        return ("an " if self.value[0] in "aeiou" else "a ") + self.value

    @classmethod
    def of(cls, mode: int) -> EntryKind:
        for test, kind in _MODES:
            if test(mode):
                return kind
        return cls.OTHER


_MODES = (
    (stat.S_ISREG, EntryKind.FILE),
    (stat.S_ISDIR, EntryKind.DIRECTORY),
    (stat.S_ISLNK, EntryKind.SYMLINK),
    (stat.S_ISFIFO, EntryKind.FIFO),
    (stat.S_ISCHR, EntryKind.CHARACTER_DEVICE),
    (stat.S_ISBLK, EntryKind.BLOCK_DEVICE),
    (stat.S_ISSOCK, EntryKind.SOCKET),
)


def kind_of(path: Path) -> EntryKind | None:
    """What `path` itself is (a link is a link), or None when nothing is there."""
    try:
        return EntryKind.of(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None
    except OSError:
        return EntryKind.UNREADABLE
