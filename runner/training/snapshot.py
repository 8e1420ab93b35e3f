"""Copy the source directory into the run, like Azure ML's snapshot.

Ignore rules come from `.tftrainignore`, else `.amlignore`, else `.gitignore` (gitignore syntax).
Always left out: .git, .tftrain, __pycache__, virtualenvs, and the outputs/logs directories.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from runner.errors import ManifestError

IGNORE_FILES = (".tftrainignore", ".amlignore", ".gitignore")
ALWAYS_IGNORED = {".git", ".tftrain", "__pycache__"}
LARGE_SNAPSHOT = 300 << 20


class _NothingIgnored:
    @staticmethod
    def match_file(path: str) -> bool:
        return False


def ignore_spec(source: Path):
    """The first ignore file's patterns (a pathspec.GitIgnoreSpec), else a spec that matches nothing."""
    for name in IGNORE_FILES:
        path = source / name
        if path.is_file():
            import pathspec  # only where there is a file to read

            return pathspec.GitIgnoreSpec.from_lines(path.read_text().splitlines())
    return _NothingIgnored()


def take_snapshot(source: Path, target: Path, exclude: tuple[str, ...] = (), skip: tuple[Path, ...] = ()) -> int:
    """Copy `source` to `target`; returns the bytes copied. `exclude` are relative paths to leave
    out (outputs, logs), `skip` absolute paths (the tftrain home when it lies inside)."""
    spec = ignore_spec(source)
    excluded = {Path(p).as_posix().strip("/") for p in exclude}
    skipped = {p.resolve() for p in skip}
    total = 0
    target.mkdir(parents=True, exist_ok=True)
    for directory, dirnames, filenames in os.walk(source):
        here = Path(directory)
        rel_dir = here.relative_to(source).as_posix()
        keep = []
        for name in sorted(dirnames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            path = here / name
            if name in ALWAYS_IGNORED or rel in excluded or path.resolve() in skipped:
                continue
            if (path / "pyvenv.cfg").exists() or spec.match_file(rel + "/"):
                continue
            if path.is_symlink():
                _refuse_link_above(rel, excluded, source)
                os.symlink(os.readlink(path), target / rel)
                continue
            (target / rel).mkdir(exist_ok=True)
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel in excluded or spec.match_file(rel):
                continue
            path = here / name
            _refuse_link_above(rel, excluded, source, "a file")
            if path.is_symlink() and not path.exists():
                os.symlink(os.readlink(path), target / rel)
                continue
            shutil.copy2(path, target / rel)
            total += (target / rel).stat().st_size
    return total


def _refuse_link_above(rel: str, excluded: set[str], source: Path, what: str = "a symlink") -> None:
    """outputs_dir and logs_dir are made in the run: none of their parents may be a link (it would
    lead the training's outputs and logs out of the run) or a file. Validation says the same; this
    holds if the source changed since."""
    for directory in excluded:
        if directory.startswith(rel + "/"):
            raise ManifestError(
                f"outputs_dir/logs_dir {directory!r} goes through {what} {rel!r} in {source}; it must stay in the run"
            )
