"""A LaunchPlan is plain data: which processes run where, with which argv and environment.

Planning runs nothing; `tftrain plan` prints the same plan that `tftrain run` executes.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field

from runner.errors import UnsupportedError
from runner.manifest.model import Manifest
from runner.rundir import RuntimePaths


@dataclass(frozen=True)
class TaskSpec:
    role: str
    index: int
    rank: int
    host: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(hash=False)
    cwd: str

    def to_dict(self, masked: frozenset[str] = frozenset()) -> dict:
        return {
            "role": self.role,
            "index": self.index,
            "rank": self.rank,
            "host": self.host,
            "argv": list(self.argv),
            "command": shlex.join(self.argv),
            "env": {key: "***" if key in masked else value for key, value in sorted(self.env.items())},
            "cwd": self.cwd,
        }


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool


@dataclass(frozen=True)
class ContainerSpec:
    """How every task's container is made (docker target)."""

    image: str
    mounts: tuple[Mount, ...]
    user: str
    network_mode: str
    shm_size: str | None = None
    memory: str | None = None
    gpus: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LaunchPlan:
    launcher: str
    target: str
    tasks: tuple[TaskSpec, ...]
    metrics_ranks: tuple[int, ...] = (0,)
    container: ContainerSpec | None = None
    secret_names: frozenset[str] = frozenset()

    def to_dict(self) -> dict:
        document = {
            "launcher": self.launcher,
            "target": self.target,
            "metrics_ranks": list(self.metrics_ranks),
            "tasks": [task.to_dict(self.secret_names) for task in self.tasks],
        }
        if self.container is not None:
            document["container"] = self.container.to_dict()
        return document


@dataclass(frozen=True)
class PlanContext:
    """What launchers need: the manifest plus everything resolved while preparing."""

    manifest: Manifest
    target: str
    python: str
    runtime: RuntimePaths
    env: dict[str, str]
    argv_tail: tuple[str, ...]


def build_plan(ctx: PlanContext) -> LaunchPlan:
    from runner.launchers import launcher_for

    return launcher_for(ctx.manifest).plan(ctx)


def unsupported_backend(backend: str) -> UnsupportedError:
    return UnsupportedError(
        f"distributed_training.backend: {backend!r} runs are not available in this version of tftrain; "
        "remove distributed_training to train in one process"
    )
