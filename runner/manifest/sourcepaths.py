"""Paths a manifest names inside its source directory, checked with symlinks resolved.

Checked when the manifest is validated and again where the path is used (the requirements file
when the environment is made, outputs and logs when the snapshot is made), since the directory
can change in between. Every answer is a short reason, or None when the path is fine.
"""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath

from runner.errors import ManifestError

MAX_TEXT_FILE = 1 << 20  # a requirements or conda file


def resolve_inside(base: Path, relative: str) -> tuple[Path | None, str | None]:
    """(the resolved path, None) when `base/relative` resolves inside `base`, else (None, why not)."""
    try:
        resolved = (base / relative).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        return None, f"{relative!r} cannot be resolved ({_reason(exc)})"
    if not resolved.is_relative_to(base):
        return None, f"{relative!r} leads outside {base} (symlinks resolved)"
    return resolved, None


def regular_file_problem(base: Path, relative: str) -> str | None:
    resolved, problem = resolve_inside(base, relative)
    if problem:
        return problem
    mode = _mode(resolved)
    if mode is None:
        return f"{relative!r} not found in source_directory {base}"
    if not stat.S_ISREG(mode):
        return f"{relative!r} in source_directory {base} is not a regular file"
    return None


def text_file_problem(base: Path, relative: str) -> str | None:
    """Why `relative` is no readable text file inside `base` (UTF-8, at most 1 MiB), or None."""
    try:
        read_text(base, relative)
    except _Unfit as exc:
        return str(exc)
    return None


def read_source_text(base: Path, relative: str, key: str) -> str:
    """The text of the file that manifest key `key` names (a requirements or conda file)."""
    try:
        return read_text(base, relative)
    except _Unfit as exc:
        raise ManifestError(f"{key}: {exc}") from None


def read_text(base: Path, relative: str) -> str:
    problem = regular_file_problem(base, relative)
    if problem:
        raise _Unfit(problem)
    path = (base / relative).resolve()
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TEXT_FILE + 1)
    except OSError as exc:
        raise _Unfit(f"{relative!r} cannot be read ({_reason(exc)})") from None
    if len(data) > MAX_TEXT_FILE:
        raise _Unfit(f"{relative!r} is larger than {MAX_TEXT_FILE >> 20} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _Unfit(f"{relative!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})") from None


def through_link(base: Path, relative: str) -> str | None:
    """Why the directory `relative` (outputs_dir, logs_dir) would not stay inside `base` once made:
    one of its parents is a symlink (the snapshot keeps links) or not a directory; None if fine.
    The directory itself may be a link: the snapshot leaves it out and makes a real one."""
    parts = PurePosixPath(relative).parts
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        mode = _mode(base / parent, follow=False)
        if mode is None:
            return None  # nothing there yet: the run makes plain directories
        if stat.S_ISLNK(mode):
            return f"{relative!r} goes through the symlink {parent!r} in {base}; outputs and logs must stay in the run"
        if not stat.S_ISDIR(mode):
            return f"{relative!r} goes through {parent!r} in {base}, which is not a directory"
    return None


class _Unfit(Exception):
    pass


def _mode(path: Path, follow: bool = True) -> int | None:
    try:
        return path.stat(follow_symlinks=follow).st_mode
    except (OSError, ValueError):
        return None


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)
