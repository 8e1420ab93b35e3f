"""Reading what a run directory holds (run.json, version.json, a rank's log, metrics.jsonl) only
when it is a regular file.

A FIFO in its place would block the reader forever (`tftrain runs show`, `tftrain logs`, doctor's
rebuild), a device would read as noise or never end. stat says what the path is before it is
opened (a link is followed: a record may be a link to a file), and fstat again after, with
O_NONBLOCK and O_NOCTTY, in case it was swapped in between.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


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
