"""load_yaml: a manifest (or another YAML file tftrain reads) from disk, bounded in size, taken
from the cache when these bytes were parsed before (runner.manifest.yamlcache), else parsed
(runner.manifest.yamlfile, which imports PyYAML) and kept there."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runner.errors import ManifestError
from runner.manifest import yamlcache
from runner.manifest.document import YamlDocument, one_line

MAX_BYTES = 1 << 20  # the file


def load_yaml(path: Path) -> YamlDocument:
    """The file's document: from the cache when these bytes were parsed before, else parsed."""
    data = _read(path)
    entry = yamlcache.entry(data)
    document = yamlcache.cached(entry, path)
    if document is None:
        from runner.manifest.yamlfile import parse

        document = parse(path, _decoded(path, data))
        yamlcache.keep(entry, document)
    return document


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise ManifestError(one_line(f"{path}: manifest not found (give another path with -f)")) from None
    except (OSError, ValueError) as exc:
        raise ManifestError(one_line(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}")) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ManifestError(one_line(f"{path}: is a directory, not a YAML file"))
        if not stat.S_ISREG(mode):
            raise ManifestError(one_line(f"{path}: is not a regular file"))
        data = b""
        while len(data) <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise ManifestError(one_line(f"{path}: cannot read: {exc.strerror}")) from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ManifestError(one_line(f"{path}: larger than {MAX_BYTES >> 20} MiB; a manifest is a few lines"))
    return data


def _decoded(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(
            one_line(f"{path}:{line}: (top level): not UTF-8 text (byte 0x{data[exc.start]:02x})")
        ) from None
