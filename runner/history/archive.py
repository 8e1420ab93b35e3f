"""tar.gz archives of models and logs extracted by our own rules (packing them is packing.py).

Nothing here calls tarfile's extract or extractall (Python 3.11's `data` filter predates the fix
for CVE-2025-4517): tarfile only parses headers, and every member is checked and written here,
one directory component at a time below a directory file descriptor, with
open(O_CREAT | O_EXCL | O_NOFOLLOW). The rules, for every path that extracts a model (`models
pull` from GitHub, `resume_from: release:`, S3 pointers):

- regular files and directories only: symlinks, hardlinks, devices, FIFOs and sparse files are
  refused (a SavedModel needs none of them);
- names are checked component by component: absolute names, `..` or empty components and NUL
  are refused; `.` components are dropped (`tar -C dir -c .` writes `./name`);
- each name is written once: a duplicate, or a file where a directory is expected (or the
  reverse), is refused;
- at most TFTRAIN_MAX_ARCHIVE_ENTRIES members (default 1,000,000) and TFTRAIN_MAX_ARCHIVE_BYTES
  bytes of file content (default 256 GiB; the caller passes them in, as runner.settings read
  them: ArchiveLimits): a header that claims more is refused at once, and the bytes are counted
  again as they are written; pax and GNU long-name headers are at most 1 MiB;
- the input is one complete tar archive, gzip-compressed or not: anything else (not a tar, a
  truncated stream, a corrupt gzip stream or checksum, a damaged header, a missing end-of-archive
  block, more than 1 MiB after it) is refused;
- `unpack` writes into a fresh directory beside the target, renamed to the target only once
  complete: after a refusal neither the target nor anything beside it is left.

A refusal is one RegistryError (exit 6) naming the archive and the member; a full disk is a
DiskFullError (exit 22). `extract_into` (the container copy-out) applies the same reader and
rules leniently: a member that breaks the type or name rules is skipped and listed instead of
failing the copy, and existing files are replaced (never written through).
"""

from __future__ import annotations

import errno
import gzip
import os
import tarfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from runner.errors import DiskFullError, RegistryError
from runner.history.checksums import CHUNK, CREATE_FLAGS, DISK_FULL, EntryKind, Skipped, fresh_dir
from runner.settings import ArchiveLimits

MAX_HEADER = 1 << 20  # pax and GNU long-name data; a name is at most PATH_MAX anyway
MAX_TRAILER = 1 << 20  # after the end-of-archive block: the writer's record padding
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TYPES = {
    tarfile.SYMTYPE: EntryKind.SYMLINK,
    tarfile.LNKTYPE: EntryKind.HARDLINK,
    tarfile.CHRTYPE: EntryKind.CHARACTER_DEVICE,
    tarfile.BLKTYPE: EntryKind.BLOCK_DEVICE,
    tarfile.FIFOTYPE: EntryKind.FIFO,
}


@dataclass(frozen=True)
class Extracted:
    files: int
    bytes: int
    skipped: tuple[Skipped, ...] = ()


def unpack(
    archive_path: Path, target: Path, label: str | None = None, limits: ArchiveLimits = ArchiveLimits()
) -> Extracted:
    """Extract the archive into `target` (absent, or an empty directory) by the rules above."""
    label = label or archive_path.name
    try:
        source = open(archive_path, "rb")
    except OSError as exc:
        raise RegistryError(f"{label}: cannot read {archive_path}: {exc.strerror}") from None
    with source, fresh_dir(target) as staging:
        root = os.open(staging, DIR_FLAGS)
        try:
            return _Extraction(root, target, label, limits, lenient=False).run(source)
        finally:
            os.close(root)


def extract_into(
    source: BinaryIO, destination: Path, label: str, strip: int = 0, limits: ArchiveLimits = ArchiveLimits()
) -> Extracted:
    """Extract into the existing directory `destination`, leniently (see above); the first `strip`
    name components are dropped, and members with nothing left are not extracted. `limits`: the
    run's (Settings.archive_limits, carried to the pool's copy-out by RunControl)."""
    destination.mkdir(parents=True, exist_ok=True)
    root = os.open(destination, DIR_FLAGS)
    try:
        return _Extraction(root, destination, label, limits, lenient=True, strip=strip).run(source)
    finally:
        os.close(root)


class _Corrupt(Exception):
    """The input is not one complete, intact tar archive (raised from inside tarfile's parsing)."""


class _Refused(Exception):
    def __init__(self, kind: EntryKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


class _Member(tarfile.TarInfo):
    """TarInfo that makes tarfile stop, not guess: a damaged or missing header is an error (tarfile
    ends the archive there quietly), big pax/long-name headers and sparse maps are refused before
    they are read into memory. `_proc_member` is tarfile's documented hook for subclasses."""

    @classmethod
    def fromtarfile(cls, archive):
        try:
            return super().fromtarfile(archive)
        except tarfile.EOFHeaderError:  # the end-of-archive block
            raise
        except tarfile.HeaderError as exc:
            if archive.offset == 0:
                raise _Corrupt(f"not a tar archive ({exc})") from None
            raise _Corrupt(f"truncated or damaged at byte {archive.offset} of the tar stream ({exc})") from None

    def _proc_member(self, archive):
        if self.size < 0:
            raise _Corrupt(f"a negative size in the header at byte {self.offset}")
        if (
            self.type
            in (
                tarfile.GNUTYPE_LONGNAME,
                tarfile.GNUTYPE_LONGLINK,
                tarfile.XHDTYPE,
                tarfile.XGLTYPE,
                tarfile.SOLARIS_XHDTYPE,
            )
            and self.size > MAX_HEADER
        ):
            raise _Corrupt(f"an extended header of {self.size} bytes at byte {self.offset} (at most {MAX_HEADER})")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Corrupt(f"refusing to extract {self.name!r}: a sparse file")
        return super()._proc_member(archive)

    def _proc_gnusparse_10(self, next, pax_headers, archive):  # noqa: A002 (tarfile's signature)
        raise _Corrupt(f"refusing to extract {next.name!r}: a sparse file")


class _Reader:
    """The tar stream (gunzipped when it is gzip): every read failure is _Corrupt, and the end of
    the input can be checked (gzip's CRC and length are verified only there)."""

    def __init__(self, source: BinaryIO) -> None:
        magic = source.read(2)
        source.seek(0)
        self.gzipped = magic == b"\x1f\x8b"
        self.stream = gzip.GzipFile(fileobj=source, mode="rb") if self.gzipped else source

    def read(self, size: int = -1) -> bytes:
        try:
            return self.stream.read(size)
        except EOFError:
            raise _Corrupt("truncated (the gzip stream ends early)") from None
        except (OSError, zlib.error) as exc:
            raise _Corrupt(f"not a valid gzip stream ({exc})" if self.gzipped else f"cannot be read ({exc})") from None

    def finish(self) -> None:
        rest = 0
        while chunk := self.read(CHUNK):
            rest += len(chunk)
            if rest > MAX_TRAILER:
                raise _Corrupt(f"more than {MAX_TRAILER} bytes after the end of the archive")


class _Extraction:
    def __init__(
        self, root: int, target: Path, label: str, limits: ArchiveLimits, lenient: bool, strip: int = 0
    ) -> None:
        self.root, self.target, self.label, self.limits = root, target, label, limits
        self.lenient, self.strip = lenient, strip
        self.entries = self.files = self.claimed = self.written = 0
        self.skipped: list[Skipped] = []

    def run(self, source: BinaryIO) -> Extracted:
        reader = _Reader(source)
        try:
            with tarfile.open(fileobj=reader, mode="r|", tarinfo=_Member) as archive:
                while (member := self._next(archive)) is not None:
                    archive.members.clear()  # one member in memory at a time, however many there are
                    self._member(archive, member)
            reader.finish()
        except _Corrupt as exc:
            raise RegistryError(f"{self.label}: {exc}") from None
        except tarfile.TarError as exc:
            raise RegistryError(f"{self.label}: not a tar archive ({exc})") from None
        return Extracted(self.files, self.written, tuple(self.skipped))

    @staticmethod
    def _next(archive: tarfile.TarFile) -> tarfile.TarInfo | None:
        try:
            return archive.next()
        except (tarfile.TarError, ValueError, OverflowError) as exc:  # a malformed pax record or sparse map
            raise _Corrupt(f"truncated or damaged ({exc})") from None

    def _refuse(self, name: str, reason: str) -> RegistryError:
        return RegistryError(f"{self.label}: refusing to extract {name!r}: {reason}")

    def _member(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise self._refuse(
                member.name, f"more than {self.limits.max_entries} entries (TFTRAIN_MAX_ARCHIVE_ENTRIES)"
            )
        if member.isreg() or member.type not in tarfile.SUPPORTED_TYPES:  # members with data: refused early
            self.claimed += member.size
            if self.claimed > self.limits.max_bytes:
                raise self._refuse(
                    member.name, f"more than {self.limits.max_bytes} bytes in all (TFTRAIN_MAX_ARCHIVE_BYTES)"
                )
        try:
            parts = _parts(member)
        except _Refused as exc:
            if not self.lenient:
                raise self._refuse(member.name, str(exc)) from None
            self.skipped.append(Skipped(member.name, exc.kind))
            return
        parts = parts[self.strip :]
        if not parts:  # the root itself, or what `strip` takes away
            return
        try:
            if member.isdir():
                os.close(self._directory(parts))
            else:
                self._file(archive, member, parts)
        except _Refused as exc:
            if not self.lenient:
                raise self._refuse(member.name, str(exc)) from None
            self.skipped.append(Skipped(member.name, exc.kind))

    def _directory(self, parts: list[str]) -> int:
        """An open descriptor of the directory `parts` below the root, made as needed; links
        are never followed."""
        fd = os.dup(self.root)
        try:
            for part in parts:
                with self._writing(parts):
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    inner = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _file(self, archive: tarfile.TarFile, member: tarfile.TarInfo, parts: list[str]) -> None:
        parent = self._directory(parts[:-1])
        try:
            with self._writing(parts):
                try:
                    fd = os.open(parts[-1], CREATE_FLAGS, 0o644, dir_fd=parent)
                except FileExistsError:
                    if not self.lenient:
                        raise _Refused(EntryKind.NAME_TAKEN, "a duplicate name") from None
                    os.unlink(parts[-1], dir_fd=parent)  # replaced, never written through
                    fd = os.open(parts[-1], CREATE_FLAGS, 0o644, dir_fd=parent)
        finally:
            os.close(parent)
        with open(fd, "wb") as out:
            data = archive.extractfile(member)
            while True:
                try:
                    chunk = data.read(CHUNK)
                except tarfile.TarError as exc:
                    raise _Corrupt(f"truncated in {member.name!r} ({exc})") from None
                if not chunk:
                    break
                self.written += len(chunk)
                if self.written > self.limits.max_bytes:
                    raise self._refuse(
                        member.name, f"more than {self.limits.max_bytes} bytes in all (TFTRAIN_MAX_ARCHIVE_BYTES)"
                    )
                with self._writing(parts):
                    out.write(chunk)
        self.files += 1

    @contextmanager
    def _writing(self, parts: list[str]):
        """OS errors while writing a member, as what they mean for the archive."""
        path = self.target.joinpath(*parts)
        try:
            yield
        except OSError as exc:
            if exc.errno in DISK_FULL:
                raise DiskFullError(f"disk full writing {path}") from None
            if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.EEXIST, errno.EISDIR):
                raise _Refused(
                    EntryKind.NAME_TAKEN,
                    "a name taken by another entry (a file where a directory is expected, or the reverse)",
                ) from None
            if exc.errno == errno.ENAMETOOLONG:
                raise _Refused(EntryKind.UNSAFE_NAME, "a name too long for this filesystem") from None
            raise RegistryError(f"{self.label}: cannot write {path}: {exc.strerror}") from None


def _parts(member: tarfile.TarInfo) -> list[str]:
    """The member's name as checked components (`.` dropped); _Refused when a rule is broken."""
    if member.sparse is not None:
        raise _Refused(EntryKind.OTHER, "a sparse file")
    if not (member.isreg() or member.isdir()):
        kind = TYPES.get(member.type, EntryKind.OTHER)
        target = f" (to {member.linkname!r})" if member.issym() or member.islnk() else ""
        raise _Refused(kind, f"{kind.described}{target}; only regular files and directories are extracted")
    name = member.name
    if "\x00" in name:
        raise _Refused(EntryKind.UNSAFE_NAME, "a NUL in the name")
    if name.startswith("/"):
        raise _Refused(EntryKind.UNSAFE_NAME, "an absolute path")
    parts = [part for part in (name.rstrip("/") if member.isdir() else name).split("/") if part != "."]
    if ".." in parts:
        raise _Refused(EntryKind.UNSAFE_NAME, "it leaves the target directory")
    if "" in parts:
        raise _Refused(EntryKind.UNSAFE_NAME, "an empty name component")
    if member.isreg() and not parts:
        raise _Refused(EntryKind.UNSAFE_NAME, "a file without a name")
    return parts
