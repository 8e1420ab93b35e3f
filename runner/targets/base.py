"""Targets run a LaunchPlan somewhere: this machine (local), containers (docker), a Kubernetes
cluster (kubernetes), or your own hosts (pool).

Each target is one class with the same small protocol: `check` refuses what it cannot run
before a run is recorded, `reserve` holds what the run needs from before Preparing to the end
of Running (the pool's leases), `environment` makes the Python environment (virtualenv or
image), `runtime` says where the run's directories are as the training sees them, `finalize`
adds the target's own files to the plan, `execute` runs it. `Target` gives the defaults; a
backend overrides what it does differently; no backend inherits from another, each is composed
of the parts it uses (an environment from runner.environments, the container runtime in
container.py and containerized.py, a launcher, supervise's clock). runner.shared.catalog names
the backends, runner.targets.factory makes one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, NamedTuple

from runner.environments.prepared import Environment, Probe
from runner.history.rundir import RunPaths, RuntimePaths
from runner.history.states import Cause, RunStatus
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan
from runner.settings import ArchiveLimits, MachineClients, Settings
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump

# The shell line every enter step begins with (the local target's, a container's): a program that
# cannot be found is one line in the task's log and exit 127, as a shell says it, for "$1" of "$@".
CANNOT_START_SH = 'command -v "$1" >/dev/null || { echo "tftrain: cannot start $1: not found" >&2; exit 127; }'


class Outcome(NamedTuple):
    status: RunStatus  # a terminal one
    exit_code: int | None
    message: str | None
    rank: int | None = None  # the task that decided it, when one did
    taken: bool = False  # its process or container was taken away (Vanished): no end of the script's own


@dataclass(slots=True)
class RunControl:
    """How a running plan is stopped: by its deadline, or by a signal to tftrain."""

    marker: str
    grace_seconds: float
    limit_seconds: int | None = None
    deadline: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None  # why `cancel` was set, when not by a signal (a sweep's early termination)
    # the same as data, where a state is decided by it (early termination): the run record's `cause`
    cause: Cause | None = None
    force: threading.Event = field(default_factory=threading.Event)
    # the run's cgroup name (runner.targets.containment.run_cgroup_name): local runs are contained in it
    cgroup: str | None = None
    # called once the plan has started (supervise): what the training need not wait for
    started: Callable[[], None] | None = None
    # called while a submitted plan waits in a scheduler's queue (Slurm's PENDING), with why: the run is Queued until
    # `started`
    queued: Callable[[str], None] | None = None
    # the signal to tftrain that set `cancel` (SIGINT: a user; SIGTERM, SIGHUP: the machine going away)
    stop_signal: int | None = None
    archive_limits: ArchiveLimits = field(default_factory=ArchiveLimits)  # what a copy-out extracts at most (Settings)
    running_since: float | None = None  # time.monotonic() when the clock started (usage counts from it)
    # how long a scheduler held the plan's allocation, where the target knows (Slurm): usage counts it, not tftrain's
    # clock
    allocated_seconds: float | None = None
    # the scheduler's account of the job and who gave it (runner.history.usage.Allocation): run.json's usage.allocation
    allocation: object | None = None

    def start_clock(self) -> None:
        """max_run_duration_seconds counts from now: as the plan starts, or leaves a scheduler's queue."""
        self.running_since = time.monotonic()
        if self.limit_seconds:
            self.deadline = self.running_since + self.limit_seconds


@dataclass(frozen=True, slots=True)
class TargetState:
    """What a target found in `check` and hands to its later steps. Each target has its own
    subclass; a reservation may turn it into another one (the pool: a job into a placed session)."""


class Target:
    """One backend. A fresh instance serves one run (or one `tftrain plan`), from check to execute."""

    name: ClassVar[str]

    def __init__(self, settings: Settings | None = None) -> None:
        # the command's (runner.settings: the machine's environment, read once); None: nothing from it
        self.settings = settings

    @property
    def gpus(self) -> str | None:
        """The GPUs this run may use, as CUDA_VISIBLE_DEVICES names them: what tftrain was given,
        or a sweep's trial its own share (runner.sweep.placement); None: every GPU."""
        return self.settings.cuda_visible_devices if self.settings is not None else None

    @property
    def machine(self) -> MachineClients:
        """Where this machine's clients point (the kubeconfig, pip's CA bundles), from the settings."""
        return self.settings.machine if self.settings is not None else MachineClients()

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> TargetState:
        raise NotImplementedError

    @contextmanager
    def reserve(
        self, loaded: LoadedManifest, state: TargetState, run_id: str, control: RunControl, logger: Logger
    ) -> Iterator[TargetState]:
        """What the run holds while it prepares and runs; by default nothing, and the state as it was."""
        yield state

    def environment(
        self, loaded: LoadedManifest, state: TargetState, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        raise NotImplementedError

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec | None]:
        """By default the training runs on this machine: it sees the run's paths as they are."""
        return paths.runtime(inputs, resume), None

    def finalize(self, plan: LaunchPlan, loaded: LoadedManifest, run_id: str) -> LaunchPlan:
        """By default the plan needs nothing more."""
        return plan

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        raise NotImplementedError

    def process_group(self, control: RunControl) -> Callable[[], object | None] | None:
        """How the run's processes are found on this machine while it trains, for its usage: a
        function giving their group (`pids()`, and `path` holding cpu.stat: the local target's
        cgroup) once it exists. By default None: they run elsewhere, or cannot be told apart."""
        return None

    def listed_prices(self, loaded: LoadedManifest):
        """The prices this target knows of before a run, besides the manifest's compute.cost (the pool
        file's `cost:`), for a sweep's cost budget; its catalog row's own_prices says it may have some."""
        return None

    def sweep_batcher(self, loaded: LoadedManifest, root: Path, sweep_id: str, concurrent: int):
        """What a sweep's trials hand their submissions to, so that those starting together reach the
        scheduler as one (Slurm: an array job, runner.targets.slurm.array_jobs), its files under `root`;
        each trial takes a ticket of it (Settings.slurm_array). By default None: each trial submits its own."""
        return None

    def stops_to_resume(self, loaded: LoadedManifest) -> bool:
        """Whether this target stops trainings with SIGTERM to resume them from their backup (Slurm's
        time limit, requeue and preemption): tftrain's start-up layer (runner/compat/startup) then holds
        a SIGTERM while Keras' callbacks save. By default False: a stop ends the run."""
        return False

    def allocated_gpus(self, state: TargetState) -> int | None:
        """The GPUs a scheduler allocates to the whole run, where the target asks for them itself
        (Slurm: every GPU its sbatch request holds); None: one per GPU-role process with use_gpu."""
        return None

    def prices(self, state: TargetState):
        """What an hour of this target's GPUs and CPUs costs (a runner.manifest.cost.CostSpec), when
        the target knows (the pool file's `cost:`); the manifest's compute.cost comes first. By default: unknown."""
        return None

    def reap_lost(self, run_id: str, home: Path) -> str | None:
        """Remove what a run whose tftrain is gone left running outside this machine's processes (its
        containers, its cluster jobs), as runner.targets.leftovers asks after marking it lost; a note of
        what that was, None for nothing. Never raises: a daemon or scheduler that does not answer leaves
        the next command to try again. By default: nothing (the run's processes are reaped for every target)."""
        return None

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        """How the model gate runs `python -m runner.serving.model_check ARGS` in the run's environment, with
        the run's paths as they are on this machine, from the start of Running to the end of
        PostProcessing. `warm`: the gate will probably run, and a target may start its process ahead.
        By default the environment is not on this machine: the gate uses one of its own."""
        yield lambda args, log, timeout: False


def follow(pump: LogPump, fd: int, plan: LaunchPlan, task, sinks: dict[int, LineSink], where: str = "") -> None:
    """Stream a started process's output into the run: the driver's (mpirun --tag-output) into
    every rank's log, a task's into its own (`where` after its label: `@host`)."""
    if task is plan.driver:
        pump.add_tagged(fd, {t.rank: sinks.get(t.rank) for t in plan.tasks}, plan.driver.argv[0])
    else:
        pump.add(task.rank, fd, sinks.get(task.rank), task.label + where)
