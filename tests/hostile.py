"""What every hostile case must show: no traceback, one clear line, the exit code from errors.py,
nothing written outside where it belongs, no secret in any stored file."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from runner.errors import FatalError

# a frame of tftrain's own code: the user's script may print tracebacks of its own (on stdout)
_OWN_FRAME = re.compile(r'File "[^"]*/runner/[^"]*\.py", line \d+')


def assert_no_traceback(result: subprocess.CompletedProcess) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in result.stderr and not _OWN_FRAME.search(output), output[-3000:]


def assert_refused(result: subprocess.CompletedProcess, error: type[FatalError], *mentions: str) -> str:
    """The command failed with `error`'s exit code and exactly one `tftrain: error:` line (which
    names `mentions`), and printed no traceback of tftrain's. Returns that line."""
    output = result.stdout + result.stderr
    assert_no_traceback(result)
    assert result.returncode == error.exit_code, (result.returncode, output[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error:")]
    assert len(lines) == 1, result.stderr[-3000:]
    for text in mentions:
        assert text in lines[0], lines[0]
    return lines[0]


def assert_clean(result: subprocess.CompletedProcess, exit_code: int = 0) -> None:
    output = result.stdout + result.stderr
    assert_no_traceback(result)
    assert result.returncode == exit_code, (result.returncode, output[-3000:])


def tree_state(root: Path, skip: Iterable[Path] = ()) -> dict[str, tuple]:
    """Every entry under root (links not followed) with its type, size and mtime; `skip` subtrees left out."""
    skipped = [Path(p) for p in skip]
    state: dict[str, tuple] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if here / d not in skipped]
        for name in dirs + files:
            path = here / name
            info = path.lstat()
            state[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return state


@contextmanager
def nothing_written_outside(root: Path, *allowed: Path):
    """Fails if anything under `root`, outside the `allowed` subtrees, appears, changes or goes."""
    before = tree_state(root, allowed)
    yield
    after = tree_state(root, allowed)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, f"written outside {[str(p) for p in allowed]}: {changed[:10]}"


def files_containing(root: Path, needles: Iterable[bytes]) -> list[str]:
    """Stored files under root that hold any of the needles (as bytes, anywhere in the file)."""
    needles = [n for n in needles if n]
    found = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            found += [f"{path}: {needle[:12]!r}…" for needle in needles if needle in data]
    return found
