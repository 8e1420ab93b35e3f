"""Reading a record (run.json, version.json) that may be anything: only a regular file is read.

A FIFO in its place would block the reader forever (`tftrain runs show`, `tftrain doctor`'s
rebuild), a device would read as noise or never end. stat says what the path is before it is
opened (a link is followed: a record may be a link to a file), and fstat again after, with
O_NONBLOCK and O_NOCTTY, in case it was swapped in between.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`; OSError when it is anything else."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read()
