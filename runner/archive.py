"""tar.gz archives of models and logs: written streaming, extracted safely."""

from __future__ import annotations

import gzip
import hashlib
import tarfile
from pathlib import Path

from runner.errors import RegistryError


LARGE = 64 << 20


def pack(source: Path, target: Path) -> str:
    """A directory's contents (or one file) as target (.tar.gz), file by file, never all in memory.
    The same files give the same bytes (no timestamp in the gzip header). Large models (weights,
    which barely compress) are stored without compression: packing must cost about a copy.
    Returns the archive's sha256, computed as it is written (no second read)."""
    size = sum(p.stat().st_size for p in source.rglob("*") if p.is_file()) if source.is_dir() else source.stat().st_size
    level = 0 if size >= LARGE else 6
    with target.open("wb") as file:
        raw = _HashingWriter(file)
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as zipped, tarfile.open(
            fileobj=zipped, mode="w"
        ) as archive:
            if source.is_dir():
                for path in sorted(source.rglob("*")):
                    archive.add(str(path), arcname=path.relative_to(source).as_posix(), recursive=False)
            else:
                archive.add(str(source), arcname=source.name)
    return raw.digest.hexdigest()


class _HashingWriter:
    """A write-only file that hashes what passes through it."""

    def __init__(self, file) -> None:
        self.file = file
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def unpack(archive_path: Path, target: Path) -> None:
    """Extract, refusing anything that would land outside `target`: absolute names, `..`, links
    pointing out, devices."""
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    with tarfile.open(archive_path, "r:*") as archive:
        members = archive.getmembers()
        for member in members:
            _check(member, root)
        for member in members:
            archive.extract(member, root, set_attrs=False, filter="data")


def _check(member: tarfile.TarInfo, root: Path) -> None:
    name = member.name
    if name.startswith("/") or Path(name).is_absolute():
        raise RegistryError(f"refusing to extract {name!r}: an absolute path")
    destination = (root / name).resolve()
    if not destination.is_relative_to(root):
        raise RegistryError(f"refusing to extract {name!r}: it leaves the target directory")
    if member.issym() or member.islnk():
        link_base = destination.parent if member.issym() else root
        if Path(member.linkname).is_absolute() or not (link_base / member.linkname).resolve().is_relative_to(root):
            raise RegistryError(f"refusing to extract {name!r}: a link to {member.linkname!r} outside the target")
    elif not (member.isfile() or member.isdir()):
        raise RegistryError(f"refusing to extract {name!r}: not a regular file or directory")
