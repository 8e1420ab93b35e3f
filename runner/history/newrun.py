"""A new run's directory under runs/: its name and number taken exclusively (never reused), the space
held in reserve for its last writes (RESERVE_BYTES of real space), and what a run that never started
leaves behind removed."""

from __future__ import annotations

import os
from pathlib import Path

from runner.errors import HistoryError
from runner.history.rundir import RunPaths, space_error
from runner.shared.refs import number_left, run_number

RESERVE_BYTES = 512 << 10


def make_run_dir(runs: Path, name: str, number: int) -> Path:
    try:
        runs.mkdir(exist_ok=True)
        while True:
            if not number_left(number):
                raise HistoryError(f"no run number is left in {runs} after {name}-{number - 1}")
            try:
                (runs / f"{name}-{number}").mkdir()  # exclusive: a directory is never reused
                return runs / f"{name}-{number}"
            except FileExistsError:
                number += 1
    except OSError as exc:
        error = space_error(exc, runs) or HistoryError(f"cannot create a run directory in {runs} ({exc.strerror})")
        raise error from None


def discard_run_dir(run_dir: Path) -> None:
    for path in (RunPaths(run_dir).reserve, RunPaths(run_dir).record):
        release_space(path)
    try:
        run_dir.rmdir()
    except OSError:
        pass


def highest_number(runs: Path) -> int:
    try:
        names = os.listdir(runs)
    except FileNotFoundError:
        return 0
    return max((run_number(name) or 0 for name in names), default=0)


def reserve_space(path: Path) -> None:
    """Hold RESERVE_BYTES of real space (not a sparse file) for the run's last writes."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        release_space(path)
        error = space_error(exc, path)
        if error is not None:
            raise error from None  # too full to start a run


def release_space(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
