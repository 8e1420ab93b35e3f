"""What the phases of one run hand each other (runner.training.pipeline): the run as every phase sees
it (`RunContext`), what Preparing and Running leave for PostProcessing (`Training`), what
PostProcessing kept (`Kept`), and the phases as they begin and end (`Session`). Typed here so that a phase takes one
value, not ten loose ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from runner.errors import FatalError
from runner.history.rundir import RunPaths
from runner.history.states import RunStatus
from runner.history.store import Store
from runner.history.usage import Usage
from runner.manifest import LoadedManifest
from runner.manifest.model import Manifest
from runner.settings import Settings
from runner.targets.base import Outcome, Probe, RunControl, Target, TargetState
from runner.telemetry.logger import Logger
from runner.telemetry.point import MetricPoint
from runner.telemetry.recorder import MetricsRecorder
from runner.training.prepare import Prepared

if TYPE_CHECKING:  # the registry is imported only once a model is registered
    from runner.history.model_registry import ModelVersion
    from runner.training.lineage import Lineage


class RunWatch(Protocol):
    """Who follows a run from outside (a sweep): told its id, control and store once it is recorded
    (to add to its record), and every metric point as it is recorded; `control.reason` +
    `control.cancel` stop it."""

    def started(self, run_id: str, control: RunControl, store: Store) -> None: ...

    def points(self, points: list[MetricPoint]) -> None: ...


class RunContext(NamedTuple):
    """One recorded run, as every phase sees it: what runs (the manifest, the target that serves it
    from check to execute, what the target checked), where it is recorded, how it is stopped
    (`control`), who hears of it (the logger, a watch) and the settings the CLI resolved."""

    loaded: LoadedManifest
    target: Target
    checked: TargetState
    store: Store
    run_id: str
    paths: RunPaths
    control: RunControl
    logger: Logger
    settings: Settings
    watch: RunWatch | None = None

    @property
    def manifest(self) -> Manifest:
        return self.loaded.manifest


@dataclass
class Training:
    """What Preparing and Running leave behind, filled in as they go: the outcome so far, tftrain's
    own failure (which then speaks for the run), and what PostProcessing reads from."""

    outcome: Outcome | None = None
    failure: FatalError | None = None
    prepared: Prepared | None = None  # None: Preparing did not finish
    lineage: Lineage | None = None
    syncing: AbstractContextManager = field(default_factory=nullcontext)  # the checkpoint sync around Running
    probe: Probe | None = None  # the gate's process, once Running started
    recorder: MetricsRecorder | None = None
    usage: Usage | None = None  # what Running used (runner.training.metering), once it ran

    def failed(self, exc: FatalError, status: RunStatus) -> None:
        self.failure, self.outcome = exc, Outcome(status, None, str(exc))

    @property
    def git(self) -> dict:
        return self.lineage.git if self.lineage is not None else {}


class Kept(NamedTuple):
    """What PostProcessing kept: the registered model, the metrics summary and its points; `refused`:
    keeping them failed (the gate refused the model, the disk was full), which fails the run."""

    model: ModelVersion | None
    summary: dict
    points: list[MetricPoint]
    refused: FatalError | None = None


class Session:
    """A run's phases as they begin and end: in the history (the store) and on the console."""

    def __init__(self, store: Store, run_id: str, logger: Logger) -> None:
        self.store, self.run_id, self.logger = store, run_id, logger

    @contextmanager
    def phase(self, name: RunStatus, control: RunControl | None = None):
        """The phase, in the history and on the console. With `control` (Running), the history's
        write waits until the plan has started (control.started): the script does not wait for its
        fsync. It is written by the time the phase ends, whatever happens, stamped with when it began.
        A plan that waits in a scheduler's queue first (control.queued: Slurm's PENDING) makes the
        run Queued, with the reason, until it starts (then stamped with that time), or never Running."""
        begun, pending, waited = time.time(), [name], []

        def record() -> None:
            while pending:
                self.store.start_phase(self.run_id, pending.pop(), at=None if waited else begun)

        def queued(reason: str) -> None:
            if pending:
                self.store.start_phase(self.run_id, RunStatus.QUEUED, reason=reason)
                waited.append(reason)

        if control is None:
            record()
        else:
            control.started = _first_then(record, control.started)
            control.queued = queued
        self.logger.phase(name)
        started = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            if waited:
                pending.clear()  # still queued: it never ran
            record()
            self.logger.phase_done(name, time.monotonic() - started, ok)


def _first_then(call: Callable[[], None], then: Callable[[], None] | None) -> Callable[[], None]:
    def both() -> None:
        call()
        if then is not None:
            then()

    return both
