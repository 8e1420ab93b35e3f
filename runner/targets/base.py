"""Targets run a LaunchPlan somewhere: this machine (local), containers (docker), a Kubernetes
cluster (kubernetes), or your own hosts (pool).

Each target is one module with the same small protocol: `check` refuses what it cannot run
before a run is recorded, `environment` makes the Python environment (virtualenv or image),
`runtime` says where the run's directories are as the training sees them, `execute` runs.
A target may also have `reserve`, a context manager held from before Preparing to the end of
Running (the pool's leases).
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runner.errors import UnsupportedError
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, HostMap, LaunchPlan
from runner.history.rundir import RunPaths, RuntimePaths


@dataclass(frozen=True)
class Outcome:
    status: str  # Completed | Failed | Canceled | TimedOut
    exit_code: int | None
    message: str | None
    rank: int | None = None  # the task that decided it, when one did


@dataclass(frozen=True)
class Environment:
    python: str  # the interpreter, as the training sees it
    description: str
    reused: bool
    isolated: bool  # a virtualenv or image without tftrain: `import runner` needs a path
    image: str | None = None
    details: dict = field(default_factory=dict, hash=False)
    placement: HostMap | None = None  # the pool target's hosts for the launchers


@dataclass
class RunControl:
    """How a running plan is stopped: by its deadline, or by a signal to tftrain."""

    marker: str
    grace_seconds: float
    limit_seconds: int | None = None
    deadline: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    force: threading.Event = field(default_factory=threading.Event)
    cgroup: str | None = None  # the run's cgroup name (runner.targets.local.cgroup.run_cgroup_name): local runs are contained in it


class Target(Protocol):
    name: str

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> Any: ...

    def environment(
        self, loaded: LoadedManifest, checked: Any, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment: ...

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec | None]: ...

    def finalize(self, plan: LaunchPlan, loaded: LoadedManifest, run_id: str) -> LaunchPlan: ...

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome: ...


def follow(pump: LogPump, fd: int, plan: LaunchPlan, task, sinks: dict[int, LineSink], where: str = "") -> None:
    """Stream a started process's output into the run: the driver's (mpirun --tag-output) into
    every rank's log, a task's into its own (`where` after its label: `@host`)."""
    if task is plan.driver:
        pump.add_tagged(fd, {t.rank: sinks.get(t.rank) for t in plan.tasks}, plan.driver.argv[0])
    else:
        pump.add(task.rank, fd, sinks.get(task.rank), task.label + where)


def reservation(target: Target, loaded: LoadedManifest, checked: Any, run_id: str, control: RunControl, logger: Logger):
    """What the run holds while it prepares and runs: the pool's leases; nothing elsewhere."""
    reserve = getattr(target, "reserve", None)
    return reserve(loaded, checked, run_id, control, logger) if reserve else nullcontext(checked)


def target_for(name: str) -> Target:
    if name == "local":
        from runner.targets.local import target as local

        return local
    if name == "docker":
        from runner.targets.docker import target as docker

        return docker
    if name == "kubernetes":
        from runner.targets.kubernetes import target as kubernetes

        return kubernetes
    if name == "pool":
        from runner.targets.pool import target as pool

        return pool
    raise UnsupportedError(f"compute.target: {name!r} is not available in this version of tftrain")
