"""A LaunchPlan is plain data: which processes run where, with which argv and environment.

Planning runs nothing; `tftrain plan` prints the same plan that `tftrain run` executes.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import UnsupportedError
from runner.manifest.model import Manifest


@dataclass(frozen=True)
class TaskSpec:
    role: str
    index: int
    rank: int
    host: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(hash=False)
    cwd: str

    def to_dict(self) -> dict:
        return {
            "role": self.role,
            "index": self.index,
            "rank": self.rank,
            "host": self.host,
            "argv": list(self.argv),
            "command": shlex.join(self.argv),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
        }


@dataclass(frozen=True)
class LaunchPlan:
    launcher: str
    target: str
    tasks: tuple[TaskSpec, ...]
    metrics_ranks: tuple[int, ...] = (0,)

    def to_dict(self) -> dict:
        return {
            "launcher": self.launcher,
            "target": self.target,
            "metrics_ranks": list(self.metrics_ranks),
            "tasks": [task.to_dict() for task in self.tasks],
        }


@dataclass(frozen=True)
class PlanContext:
    """What launchers need: the manifest plus everything resolved while preparing."""

    manifest: Manifest
    target: str
    python: str
    workdir: Path
    env: dict[str, str]
    argv_tail: tuple[str, ...]
    metrics_dir: Path

    def metrics_file(self, rank: int) -> Path:
        return self.metrics_dir / f"{rank}.jsonl"


def build_plan(ctx: PlanContext) -> LaunchPlan:
    from runner.launchers import launcher_for

    return launcher_for(ctx.manifest).plan(ctx)


def unsupported_backend(backend: str) -> UnsupportedError:
    return UnsupportedError(
        f"distributed_training.backend: {backend!r} runs are not available in this version of tftrain; "
        "remove distributed_training to train in one process"
    )
