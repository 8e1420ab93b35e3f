"""Hostile tar archives, built with tarfile for the tests: CVE-2025-4517's symlink chain (as in
CPython's test_realpath_limit_attack), links, devices, odd names."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

PATH_MAX = os.pathconf("/", "PC_PATH_MAX")


def archive_bytes(members, fmt=tarfile.PAX_FORMAT, compress=True) -> bytes:
    """A tar (.gz) of (TarInfo, data or None) pairs."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buffer.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


def entry(name: str, data: bytes | None = None, type: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = type, link, mode
    if type == tarfile.REGTYPE and data is None:
        data = b""
    return info, data


def directory(name: str):
    return entry(name, type=tarfile.DIRTYPE, mode=0o755)


def with_pax(name: str, headers: dict, data: bytes = b"x"):
    info, data = entry(name, data)
    info.pax_headers = headers
    return info, data


def device(name: str, major: int, minor: int):
    info, _ = entry(name, type=tarfile.CHRTYPE)
    info.devmajor, info.devminor = major, minor
    return info, None


def cve_2025_4517(destination: Path) -> bytes:
    """CPython's test_realpath_limit_attack: directories and symlinks whose resolved path outgrows
    PATH_MAX, so that os.path.realpath stops expanding, then a link chain to the destination's
    parent, a hardlink through it to `flag` there, an overwrite and a new file."""
    steps = "abcdefghijklmnop"
    component = "d" * ((PATH_MAX - len(str(destination)) - 1) // (len(steps) + 1))
    members, path = [], ""
    for step in steps:
        members.append(entry(os.path.join(path, component), type=tarfile.DIRTYPE, mode=0o777))
        members.append(entry(os.path.join(path, step), type=tarfile.SYMTYPE, link=component))
        path = os.path.join(path, component)
    linkpath = os.path.join(*steps, "l" * 254)
    members.append(entry(linkpath, type=tarfile.SYMTYPE, link=os.path.join(*[".."] * len(steps))))
    members.append(entry("escape", type=tarfile.SYMTYPE, link=os.path.join(linkpath, "..")))
    members.append(entry("flaglink", type=tarfile.LNKTYPE, link=os.path.join("escape", "flag")))
    members.append(entry("flaglink", b"overwrite"))
    members.append(entry("escape/newfile", b"new"))
    return archive_bytes(members)


def plain_tar(data: bytes) -> bytes:
    return archive_bytes([entry("saved_model.pb", data)], compress=False)
