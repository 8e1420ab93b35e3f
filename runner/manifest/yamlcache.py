"""YAML files parsed before, by content: a manifest read again (each `tftrain run` reads the same
few) comes from here without importing PyYAML, which is a third of tftrain's start.

An entry is JSON (the plain values and the line of each key) named by the SHA-256 of the file's
bytes, of the parser's own code (runner/manifest/yamlfile.py) and of the installed PyYAML. Only
documents that JSON holds exactly are kept: every key a string. An entry is written whole (a
temporary file renamed); one that cannot be read, or does not have the expected shape, is parsed
again; a cache that cannot be written is no error. The oldest entries go past MAX_ENTRIES."""

from __future__ import annotations

import hashlib
import json
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from runner.manifest.document import YamlDocument
from runner.paths import cache_dir

FORMAT = 1  # of an entry; a new one ignores the old entries
MAX_ENTRIES = 256
MAX_ENTRY_BYTES = 8 << 20
_PARSER_SOURCE = Path(__file__).with_name("yamlfile.py")


def directory() -> Path:
    return cache_dir() / "yaml"


def cached(entry: Path | None, path: Path) -> YamlDocument | None:
    """The document kept at `entry` (see `entry`), as read from `path` now; None when there is none."""
    if entry is None:
        return None
    try:
        with open(entry, "rb") as handle:
            text = handle.read(MAX_ENTRY_BYTES + 1)
        kept = json.loads(text)
        if len(text) > MAX_ENTRY_BYTES or kept.get("format") != FORMAT or not isinstance(kept.get("empty"), bool):
            return None
        lines = {_location(loc): line for loc, line in kept["lines"] if type(line) is int}
        if len(lines) != len(kept["lines"]) or not _exact(kept["data"]):
            return None
    except (OSError, ValueError, TypeError, AttributeError, KeyError, RecursionError):  # no entry, or not one of ours
        return None
    try:
        os.utime(entry)  # recently used: kept longest
    except OSError:
        pass
    return YamlDocument(path, kept["data"], lines, empty=kept["empty"])


def keep(entry: Path | None, document: YamlDocument) -> None:
    """Keep `document` at `entry`, where JSON holds it exactly; never fails."""
    if entry is None or not _exact(document.data):
        return
    text = json.dumps(
        {
            "format": FORMAT,
            "empty": document.empty,
            "data": document.data,
            "lines": [[list(loc), line] for loc, line in document.lines.items()],
        }
    ).encode()
    if len(text) > MAX_ENTRY_BYTES:
        return
    partial = entry.with_name(f".{entry.name}.{os.getpid()}")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(partial, "wb", opener=lambda name, flags: os.open(name, flags, 0o600)) as handle:
            handle.write(text)  # all of it, or OSError: a short entry is never renamed into place
        os.replace(partial, entry)
        _prune(entry.parent)
    except OSError:  # read-only or full: the next run parses again
        try:
            partial.unlink()
        except OSError:
            pass


def entry(data: bytes) -> Path | None:
    """Where the document of a file holding `data` is kept; None where that cannot be told."""
    try:
        digest = hashlib.sha256(b"tftrain-yaml-%d\0" % FORMAT)
        digest.update(_PARSER_SOURCE.read_bytes())
        spec = find_spec("yaml")
        if spec is None or spec.origin is None:
            return None
        installed = os.stat(spec.origin)
        digest.update(f"\0{spec.origin}\0{installed.st_size}\0{installed.st_mtime_ns}\0".encode())
        digest.update(data)
    except (OSError, ValueError, ImportError):
        return None
    return directory() / f"{digest.hexdigest()}.json"


def _location(loc: Any) -> tuple:
    if not isinstance(loc, list) or not all(type(part) in (str, int) for part in loc):
        raise TypeError("not a location")
    return tuple(loc)


def _exact(value: Any) -> bool:
    """Whether JSON gives back exactly `value`: strings as keys, and lists, text, numbers, booleans, null."""
    if isinstance(value, dict):
        return all(type(key) is str and _exact(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_exact(item) for item in value)
    return value is None or type(value) in (str, int, float, bool)


def _prune(folder: Path) -> None:
    entries = [entry for entry in folder.iterdir() if entry.suffix == ".json"]
    if len(entries) <= MAX_ENTRIES:
        return
    aged = []
    for entry in entries:
        try:
            aged.append((entry.stat().st_mtime_ns, entry))
        except OSError:
            pass  # removed meanwhile (another tftrain pruning)
    for _, entry in sorted(aged)[: len(aged) - MAX_ENTRIES // 2]:
        entry.unlink(missing_ok=True)
