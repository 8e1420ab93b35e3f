"""A version or a run directory packed as a .tar.gz (what a release or an S3 pointer carries): regular
files and directories only, in a stable order, with the sha256 of the bytes written."""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from pathlib import Path

from runner.errors import RegistryError
from runner.history.checksums import READ_FLAGS, Entry, EntryKind, kind_of, walk

LARGE = 64 << 20


def pack(source: Path, target: Path, withheld: frozenset[str] = frozenset()) -> str:
    """A directory's contents (or one file) as target (.tar.gz), file by file, never all in memory.
    Regular files and directories only, as the registry keeps them: links, FIFOs, devices and
    sockets are left out, never opened. The same files give the same bytes (no timestamp in the
    gzip header). Large models (weights, which barely compress) are stored without compression:
    packing must cost about a copy. Returns the archive's sha256, computed as it is written.
    `withheld`: files (by relative name) left out, as registration left them out (a secret's value)."""
    top = kind_of(source)
    if top is EntryKind.DIRECTORY:
        entries = [entry for entry in walk(source) if entry.name not in withheld]
    elif top is EntryKind.FILE:
        entries = [Entry(source.name, source, top, source.lstat().st_size)]
    else:
        raise RegistryError(
            f"cannot pack {source}: it is {'missing' if top is None else top.described}; "
            "only a regular file or a directory is packed"
        )
    level = 0 if sum(entry.size for entry in entries) >= LARGE else 6
    digest = hashlib.sha256()
    with target.open("wb") as file:
        raw = _HashingWriter(file, digest)
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as zipped,
            tarfile.open(
                fileobj=zipped,
                mode="w",
                dereference=True,  # a file with two names is two files, never a hardlink
            ) as archive,
        ):
            for entry in entries:
                if entry.kind is EntryKind.DIRECTORY:
                    archive.add(str(entry.path), arcname=entry.name, recursive=False)
                elif entry.kind is EntryKind.FILE:
                    _add_file(archive, entry)
    return digest.hexdigest()


def _add_file(archive: tarfile.TarFile, entry: Entry) -> None:
    try:
        fd = os.open(entry.path, READ_FLAGS)
    except OSError:
        return
    with open(fd, "rb") as handle:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # still the regular file the walk saw
            archive.addfile(archive.gettarinfo(arcname=entry.name, fileobj=handle), handle)


class _HashingWriter:
    """A write-only file that hashes what passes through it."""

    def __init__(self, file, digest) -> None:
        self.file = file
        self.digest = digest

    def write(self, data) -> int:
        self.digest.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()
