"""What the index lists, as rows: a run (RunRow), a phase of it (PhaseRow), a run found lost (LostRun)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from runner.history.states import RunStatus


class RunRow(NamedTuple):
    run_id: str
    name: str
    status: RunStatus
    created: float
    ended: float | None
    exit_code: int | None
    run_dir: Path
    manifest: str
    git: dict
    message: str | None

    @property
    def finished(self) -> bool:
        return self.status.terminal


class PhaseRow(NamedTuple):
    phase: RunStatus
    started: float
    ended: float | None


class LostRun(NamedTuple):
    """A run `Store.mark_lost` marked Failed: what is needed to remove what it left running."""

    run_id: str
    manifest: str | None  # its manifest's JSON (which target ran it)
    message: str  # what its record now says, for people
