"""Files that hold a secret's value: a `secrets:` entry's or model.signing's key, found in a run's
snapshot (a key kept in the source directory is copied with it) or under its model path. Such a
file is named in one warning, and never registered or published: registration skips it (listed in
version.json's "skipped"), and a release's model archive leaves out what registration skipped.

Files are read as the registry reads them: regular files only, no link followed, in chunks."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from runner.history.checksums import CHUNK, Entry, walk
from runner.history.regular import READ_FLAGS, EntryKind, kind_of

MIN_CHARS = 8  # a shorter value would be found in too many files to mean anything
MIN_LINE = 32  # a line of a multi-line value (a PEM key's base64) found alone: the file was re-wrapped


def secret_values(names, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The values of the `secrets:` entries `names`, model.signing's key among them (withheld from
    tftrain's environment, still held in its memory)."""
    from runner.history.signing import held_key

    return {name: value for name in names if (value := held_key(name, environ))}


def needles(secrets: Mapping[str, str]) -> dict[bytes, str]:
    """What to look for → the secret's name: each value, and the first long line of a multi-line one."""
    found: dict[bytes, str] = {}
    for name, value in secrets.items():
        text = (value or "").strip()
        if len(text) >= MIN_CHARS:
            found.setdefault(text.encode("utf-8", "surrogateescape"), name)
        lines = [
            line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_LINE and not line.startswith("-----")
        ]
        if len(text.splitlines()) > 1 and lines:
            found.setdefault(lines[0].encode("utf-8", "surrogateescape"), name)
    return found


def secret_files(root: Path, secrets: Mapping[str, str]) -> dict[str, str]:
    """Regular files under `root` (or `root` itself, a file) holding a secret's value: their path
    relative to `root` (posix; the file's name for a file) → the secret's name."""
    wanted = needles(secrets)
    if not wanted:
        return {}
    top = kind_of(root)
    entries: Iterator[Entry] | list[Entry] = (
        [Entry(root.name, root, top)] if top is EntryKind.FILE else walk(root) if top is EntryKind.DIRECTORY else []
    )
    found = {}
    for entry in entries:
        if entry.kind is EntryKind.FILE and (name := _holds(entry.path, wanted)) is not None:
            found[entry.name] = name
    return found


def _holds(path: Path, wanted: dict[bytes, str]) -> str | None:
    overlap = max(map(len, wanted)) - 1
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None  # a link or unreadable: never registered anyway
    with open(fd, "rb", buffering=0) as reader:
        if EntryKind.of(os.fstat(fd).st_mode) is not EntryKind.FILE:
            return None
        tail = b""
        while chunk := reader.read(CHUNK):
            window = tail + chunk
            for needle, name in wanted.items():
                if needle in window:
                    return name
            tail = window[-overlap:] if overlap else b""
    return None


def warning(where: str, relative: str, secret: str) -> str:
    return (
        f"{where}/{relative} holds the value of the secret {secret}: it is never registered or published "
        "(keep it out of the source directory, or list it in .tftrainignore)"
    )
