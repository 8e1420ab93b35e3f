"""Model files on disk: walked by lstat (links are reported, never followed), copied and hashed
in one pass into a fresh directory that takes its final name only once complete (`fresh_dir`),
and sha256 manifests (SHA256SUMS format), streamed, never read whole.

Only regular files and directories are model files. Everything else (symlinks, FIFOs, devices,
sockets, entries that cannot be read) is never opened: a copy lists it as skipped, a check of a
registered version calls it damage. A file is opened with O_NOFOLLOW | O_NONBLOCK and checked
again with fstat, so an entry swapped for a link or a FIFO after the walk saw it is skipped too,
and a FIFO never blocks.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import DiskFullError, RegistryError
from runner.history.regular import READ_FLAGS, EntryKind, kind_of

CHUNK = 1 << 20
MAX_SUMS = 1 << 30  # a SHA256SUMS line per file: a million files take about 150 MB
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class Skipped:
    """An entry left out of a copy: its path (relative, posix) and what it is."""

    path: str
    kind: EntryKind

    def __str__(self) -> str:
        return f"{self.path} ({self.kind.value})"

    def as_json(self) -> dict:
        return {"path": self.path, "kind": self.kind.value}

    @classmethod
    def from_json(cls, data: dict) -> Skipped:
        return cls(data["path"], EntryKind(data["kind"]))


def skipped_note(skipped, where: str, shown: int = 10) -> str:
    """`skipped 2 entries under outputs/model: a/b (symlink), c (FIFO)`, for a warning."""
    more = f", and {len(skipped) - shown} more" if len(skipped) > shown else ""
    return f"skipped {len(skipped)} entries under {where}: {', '.join(map(str, skipped[:shown]))}{more}"


@dataclass(frozen=True)
class Entry:
    name: str  # relative posix path below the walked root
    path: Path
    kind: EntryKind
    size: int = 0


def walk(root: Path) -> Iterator[Entry]:
    """Every entry below the directory `root`, depth first in name order, by lstat. A directory
    that cannot be listed is one UNREADABLE entry (it is not descended)."""
    listing = _listing(root)
    if listing is None:
        yield Entry("", root, EntryKind.UNREADABLE)
        return
    stack = [("", iter(listing))]  # no recursion: any depth the filesystem allows
    while stack:
        prefix, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        name, path = prefix + child.name, Path(child.path)
        try:
            info = child.stat(follow_symlinks=False)
        except OSError:
            yield Entry(name, path, EntryKind.UNREADABLE)
            continue
        kind = EntryKind.of(info.st_mode)
        if kind is EntryKind.DIRECTORY:
            below = _listing(path)
            if below is None:
                yield Entry(name, path, EntryKind.UNREADABLE)
                continue
            stack.append((name + "/", iter(below)))
        yield Entry(name, path, kind, info.st_size if kind is EntryKind.FILE else 0)


def _listing(directory: Path) -> list[os.DirEntry] | None:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return None


@contextmanager
def writing(path: Path):
    """A full disk (or quota) while writing `path` is a DiskFullError naming it; any other OS
    error a RegistryError naming it."""
    try:
        yield
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise DiskFullError(f"disk full writing {path}") from None
        raise RegistryError(f"cannot write {path}: {exc.strerror or exc}") from None


@contextmanager
def fresh_dir(target: Path) -> Iterator[Path]:
    """A new, empty directory beside `target`, renamed to `target` (absent, or an empty directory)
    when the block ends; removed with all that is in it when the block raises, with the parents
    this call had to make. Nothing half-written ever has the target's name."""
    made = [parent for parent in (target.parent, *target.parent.parents) if not parent.exists()][::-1]
    try:
        with writing(target):
            for parent in made:
                parent.mkdir()
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
        try:
            yield staging
            staging.chmod(0o755)
            _rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except BaseException:
        for parent in reversed(made):
            try:
                parent.rmdir()
            except OSError:
                break
        raise


def _rename(staging: Path, target: Path) -> None:
    try:
        os.rename(staging, target)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise RegistryError(f"{target} exists and is not empty") from None
        if exc.errno == errno.ENOTDIR:
            raise RegistryError(f"{target} exists and is not a directory") from None
        raise RegistryError(f"cannot create {target}: {exc.strerror}") from None


@dataclass(frozen=True)
class Copied:
    sums: dict[str, str]
    skipped: tuple[Skipped, ...]
    bytes: int


def copy_tree(source: Path, into: Path, withheld: frozenset[str] = frozenset()) -> Copied:
    """Copy a model (a directory's contents, or one regular file) into the existing, empty
    directory `into`, hashing as it copies: one read of every file. Only regular files and
    directories are copied; everything else is skipped, never opened, and listed. `withheld`:
    files (by relative name) holding a secret's value, skipped and listed as such."""
    sums: dict[str, str] = {}
    skipped: list[Skipped] = []
    total = 0
    top = kind_of(source)
    if top is EntryKind.FILE:
        entries = [Entry(source.name, source, top)]
    elif top is EntryKind.DIRECTORY:
        entries = walk(source)
    else:
        entries = [Entry(source.name, source, top or EntryKind.UNREADABLE)]
    for entry in entries:
        target = into / entry.name
        if entry.kind is EntryKind.DIRECTORY:
            with writing(target):
                target.mkdir()
            continue
        outcome = (
            copy_file(entry.path, target) if entry.kind is EntryKind.FILE and entry.name not in withheld else entry.kind
        )
        if entry.kind is EntryKind.FILE and entry.name in withheld:
            outcome = EntryKind.SECRET
        if isinstance(outcome, EntryKind):
            skipped.append(Skipped(entry.name or ".", outcome))
            continue
        sums[entry.name], size = outcome
        total += size
    return Copied(sums, tuple(skipped), total)


def copy_file(source: Path, target: Path) -> tuple[str, int] | EntryKind:
    """Copy one regular file to the new path `target`: (sha256, size), or, when `source` turns out
    not to be a readable regular file, what it is instead (and `target` is not left behind)."""
    try:
        fd = os.open(source, READ_FLAGS)
    except OSError as exc:
        return EntryKind.SYMLINK if exc.errno == errno.ELOOP else EntryKind.UNREADABLE
    with open(fd, "rb", buffering=0) as reader:
        kind = EntryKind.of(os.fstat(fd).st_mode)
        if kind is not EntryKind.FILE:
            return kind
        digest, size = hashlib.sha256(), 0
        with writing(target), open(os.open(target, CREATE_FLAGS, 0o644), "wb") as writer:
            while True:
                try:
                    chunk = reader.read(CHUNK)
                except OSError:
                    chunk = None
                if chunk is None:  # a read error half-way: the copy is not kept
                    writer.close()
                    target.unlink()
                    return EntryKind.UNREADABLE
                if not chunk:
                    break
                digest.update(chunk)
                writer.write(chunk)
                size += len(chunk)
    return digest.hexdigest(), size


def sha256_file(path: Path, copy=None) -> str:
    """The sha256 of `path`'s bytes; with `copy` (an open binary file), those bytes written to it too,
    in the same pass (flushed)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            if copy is not None:
                copy.write(chunk)
    if copy is not None:
        copy.flush()
    return digest.hexdigest()


def sums_of(root: Path) -> dict[str, str]:
    """relative posix path → sha256 for every file below root (sorted)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in files}


SUMS_LINE = re.compile(r"^(?P<escaped>\\?)(?P<digest>[0-9a-fA-F]{64}) [ *](?P<name>.+)$")


def format_sums(sums: dict[str, str]) -> str:
    """GNU sha256sum's format; a name with a backslash or a newline is escaped as it does."""
    lines = []
    for name, digest in sums.items():
        if "\\" in name or "\n" in name or "\r" in name:
            escaped = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            lines.append(f"\\{digest}  {escaped}\n")
        else:
            lines.append(f"{digest}  {name}\n")
    return "".join(lines)


def parse_sums(text: str) -> dict[str, str]:
    """name → sha256 from SHA256SUMS text; ValueError naming the first line that is not
    `SHA256  NAME`."""
    sums = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        match = SUMS_LINE.match(line)
        if not match:
            raise ValueError(f"line {number} is not '<sha256>  NAME'")
        name = match["name"]
        if match["escaped"]:
            name = re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m[1], m[1]), name)
        sums[name] = match["digest"].lower()
    return sums


def read_sums(path: Path) -> dict[str, str]:
    """parse_sums of the regular file `path` (never a link or a FIFO); OSError or ValueError saying
    what is wrong. Bytes that are not UTF-8 (a file name can be anything) survive as they are."""
    kind = kind_of(path)
    if kind is None:
        raise ValueError("SHA256SUMS is missing")
    if kind is not EntryKind.FILE:
        raise ValueError(f"SHA256SUMS is {kind.described}")
    fd = os.open(path, READ_FLAGS)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("SHA256SUMS is not a regular file")
        data = handle.read(MAX_SUMS + 1)
    if len(data) > MAX_SUMS:
        raise ValueError(f"SHA256SUMS is larger than {MAX_SUMS} bytes")
    try:
        return parse_sums(data.decode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise ValueError(f"SHA256SUMS {exc}") from None


def write_sums(path: Path, sums: dict[str, str]) -> None:
    with writing(path):
        path.write_bytes(format_sums(sums).encode("utf-8", "surrogateescape"))


def mismatches(actual: dict[str, str], expected: dict[str, str]) -> list[str]:
    """Files whose content differs from `expected`, or that are missing or unexpected."""
    problems = [f"{name}: missing" for name in expected if name not in actual]
    problems += [f"{name}: sha256 mismatch" for name in expected if name in actual and actual[name] != expected[name]]
    problems += [f"{name}: not in SHA256SUMS" for name in actual if name not in expected]
    return problems
