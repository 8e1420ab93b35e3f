"""A LaunchPlan is plain data: which processes run where, with which argv and environment.

Planning runs nothing; `tftrain plan` prints the same plan that `tftrain run` executes.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from runner.errors import PlanError
from runner.history.rundir import RuntimePaths
from runner.manifest.model import Manifest
from runner.plan.argv import script_path


class _Word(str, Enum):
    """A plan's word: equal to its string, written as it (f-strings, JSON, TF_CONFIG, docker's API)."""

    __str__ = str.__str__
    __format__ = str.__format__


class Role(_Word):
    """What a task is. TF_CONFIG's task types (chief, worker, ps, evaluator), Kubernetes' replica
    types and the log prefixes follow it; which roles want a GPU, which decide the job's end."""

    MAIN = "main"  # the one process of a single-process run
    RANK = "rank"  # an MPI rank (mpirun or horovodrun starts it)
    LAUNCHER = "launcher"  # mpirun / horovodrun itself: the driver
    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"


class SuccessPolicy(_Word):
    """Which tasks ending well end the job (runner.targets.supervise decides by it)."""

    MAIN = "main"  # the first task (or the driver)
    CHIEF = "chief"  # the chief, else worker 0
    ALL_WORKERS = "all_workers"  # every worker


class NetworkMode(_Word):
    """The network a task's container joins. host and bridge are docker's; pod and pool say the
    container is not on this machine's daemon (a Kubernetes pod's network; each pool host's, where
    files are copied in and back rather than mounted)."""

    HOST = "host"
    BRIDGE = "bridge"
    POD = "pod"
    POOL = "pool"


@dataclass(frozen=True, slots=True)
class TaskSpec:
    role: Role
    index: int
    rank: int
    host: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(hash=False)
    cwd: str

    def __post_init__(self) -> None:
        # each task owns its environment: a dict shared with the planner (or another task) would
        # change under the frozen spec when the planner goes on editing it
        object.__setattr__(self, "env", dict(self.env))

    @property
    def label(self) -> str:
        """How its log lines are prefixed: `0` for an MPI rank, `worker 1` for a TF_CONFIG task."""
        return str(self.rank) if self.role in (Role.MAIN, Role.RANK) else f"{self.role} {self.index}"

    def to_dict(self, masked: frozenset[str] = frozenset()) -> dict:
        return {
            "role": str(self.role),
            "index": self.index,
            "rank": self.rank,
            "host": self.host,
            "argv": list(self.argv),
            "command": shlex.join(self.argv),
            "env": {key: "***" if key in masked else value for key, value in sorted(self.env.items())},
            "cwd": self.cwd,
        }


class Mount(NamedTuple):
    source: str
    target: str
    read_only: bool


class ContainerSpec(NamedTuple):
    """How every task's container is made (docker target)."""

    image: str
    mounts: tuple[Mount, ...]
    user: str
    network_mode: NetworkMode
    shm_size: str | None = None
    memory: str | None = None
    gpus: bool = False
    # the task's stderr joins its stdout inside the container (through /bin/sh, which images tftrain
    # builds have; a user-managed image may not): one stream keeps the lines in the order written
    one_stream: bool = True

    def to_dict(self) -> dict:
        # lists and plain strings, as YAML writes them
        return {
            **self._asdict(),
            "network_mode": str(self.network_mode),
            "mounts": [mount._asdict() for mount in self.mounts],
        }


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """`tasks` are the training processes. With a `driver` (mpirun), tftrain starts only the
    driver, which starts the tasks; otherwise it starts each task itself."""

    launcher: str
    target: str
    tasks: tuple[TaskSpec, ...]
    metrics_ranks: tuple[int, ...] = (0,)
    driver: TaskSpec | None = None
    success_policy: SuccessPolicy = SuccessPolicy.MAIN
    files: dict[str, str] = field(default_factory=dict, hash=False)  # name → content, written to the launch dir
    container: ContainerSpec | None = None
    secret_names: frozenset[str] = frozenset()

    @property
    def processes(self) -> tuple[TaskSpec, ...]:
        """What tftrain itself starts."""
        return (self.driver,) if self.driver else self.tasks

    def to_dict(self) -> dict:
        document = {
            "launcher": self.launcher,
            "target": self.target,
            "success_policy": str(self.success_policy),
            "metrics_ranks": list(self.metrics_ranks),
            "tasks": [task.to_dict(self.secret_names) for task in self.tasks],
        }
        if self.driver is not None:
            document["driver"] = self.driver.to_dict(self.secret_names)
        if self.files:
            document["files"] = dict(self.files)
        if self.container is not None:
            document["container"] = self.container.to_dict()
        return document


class PlanContext(NamedTuple):
    """What launchers need: the manifest plus everything resolved while preparing."""

    manifest: Manifest
    target: str
    python: str
    runtime: RuntimePaths
    env: dict[str, str]
    argv_tail: tuple[str, ...]
    placement: HostMap | None = None  # the pool target's; None: every task on this machine

    @property
    def script_argv(self) -> tuple[str, ...]:
        return (self.python, script_path(self.manifest.entry_script), *self.argv_tail)


DEFAULT_SSH_PORT = 12345  # the MPI containers' sshd (Horovod's documented example port)


@dataclass(frozen=True, slots=True)
class HostMap:
    """Where the pool placed a job: "node 0" (MPI), "worker 1", "main 0" → (host name, address)."""

    hosts: dict[str, tuple[str, str]] = field(hash=False)
    ssh_port: int = DEFAULT_SSH_PORT
    base_port: int = 23456  # TF_CONFIG tasks: base_port, base_port+1, … on each host

    def name(self, key: str) -> str:
        return self.hosts[key][0]

    def address(self, key: str) -> str:
        return self.hosts[key][1]


def check_metrics_ranks(manifest: Manifest, count: int) -> tuple[int, ...]:
    ranks = tuple(manifest.metrics.ranks)
    bad = [rank for rank in ranks if not 0 <= rank < count]
    if bad:
        raise PlanError(f"metrics.ranks: {bad[0]} is not a rank of this job (ranks 0–{count - 1})")
    return ranks
