"""Targets run a LaunchPlan somewhere (local now; docker, pool, kubernetes later)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from runner.errors import UnsupportedError
from runner.logpump import LineSink, LogPump
from runner.plan import LaunchPlan


@dataclass(frozen=True)
class Outcome:
    status: str  # Completed | Failed | Canceled | TimedOut
    exit_code: int | None
    message: str | None


@dataclass
class RunControl:
    """How a running plan is stopped: by its deadline, or by a signal to tftrain."""

    marker: str
    grace_seconds: float
    limit_seconds: int | None = None
    deadline: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    force: threading.Event = field(default_factory=threading.Event)


class Target(Protocol):
    name: str

    def execute(self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl) -> Outcome: ...


def target_for(name: str) -> Target:
    if name == "local":
        from runner.targets import local

        return local
    raise UnsupportedError(
        f"compute.target: {name!r} is not available in this version of tftrain; use compute.target: local"
    )
