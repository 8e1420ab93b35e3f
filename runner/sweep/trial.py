"""One trial of a sweep: a full tftrain run with the trial's values in its script_params, its
primary metric reported to the study as it is recorded, stopped when the policy prunes it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from runner.errors import FatalError, extra_module
from runner.history.record import RunRecord, RunStatus
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.manifest.sweep import Objective
from runner.run.pipeline import run_manifest
from runner.run.retry import LOST_MESSAGE
from runner.settings import LoggerSettings, Settings
from runner.targets.base import RunControl
from runner.telemetry.logger import Logger
from runner.telemetry.point import MetricPoint

LIVE_SOURCES = ("log", "file")  # TensorBoard's points are read after the run: too late to prune with
EARLY_TERMINATION = "early termination"  # how a run the policy stopped says so (its message)


class Verdict(Enum):
    """What the study is told about a trial, read from what its run did: the run record is the one
    truth of a trial's state, the study (and the sweep's table) follow it."""

    COMPLETE = "complete"  # completed with a value of the objective
    PRUNED = "pruned"  # stopped by the early-termination policy
    FAILED = "failed"  # failed, out of its time, or completed without the objective
    STOPPED = "stopped"  # canceled from outside (a signal, its sweep halted) or lost: told FAIL, resume runs it again


@dataclass(frozen=True)
class TrialResult:
    number: int
    run_id: str | None
    status: RunStatus
    value: float | None  # the objective: the primary metric's last value
    early_terminated: bool
    message: str | None
    reported: tuple[str, ...] = ()  # the metric names the run recorded (to say which exist when the objective is not among them)

    @classmethod
    def of_record(cls, number: int, record: RunRecord, metric: str) -> TrialResult:
        """What a finished run did, as its trial's result (a study that could not be told is told from this)."""
        stats = record.metrics.metrics.get(metric) if record.metrics else None
        value = stats.last if stats is not None and isinstance(stats.last, (int, float)) else None
        early = record.status == RunStatus.CANCELED and (record.message or "").startswith(EARLY_TERMINATION)
        return cls(number, record.run_id, record.status, value, early, record.message)

    @property
    def shown_status(self) -> RunStatus:
        """The trial's status in the table: a trial out of time (trial_timeout) was canceled, as
        HyperDrive says; its run says TimedOut."""
        return RunStatus.CANCELED if self.status == RunStatus.TIMED_OUT else self.status

    @property
    def verdict(self) -> Verdict:
        if self.status == RunStatus.COMPLETED and self.value is not None:
            return Verdict.COMPLETE
        if self.early_terminated:
            return Verdict.PRUNED
        # canceled from outside, or lost (its tftrain was killed: Store.reconcile marks it Failed)
        lost = self.status == RunStatus.FAILED and (self.message or "").startswith(LOST_MESSAGE)
        return Verdict.STOPPED if self.status == RunStatus.CANCELED or lost else Verdict.FAILED


def tell(study, trial, result: TrialResult) -> Verdict:
    """Record `result` on `trial` (an optuna Trial) and end it in the study: the one way a trial's
    state is set, live or when a resumed sweep catches up with runs that ended unseen."""
    state = extra_module("optuna", "sweep", "a sweep").trial.TrialState
    trial.set_user_attr("status", result.shown_status.value)
    trial.set_user_attr("early_terminated", result.early_terminated)
    trial.set_user_attr("message", result.message)
    verdict = result.verdict
    if verdict == Verdict.COMPLETE:
        study.tell(trial, result.value)
    else:
        study.tell(trial, state=state.PRUNED if verdict == Verdict.PRUNED else state.FAIL)
    return verdict


class TrialWatch:
    """Reports the objective metric to the Optuna trial at each report (step = 1, 2, 3 …, HyperDrive's
    interval) and stops the run when the study's pruner says so."""

    def __init__(self, trial, objective: Objective, sweep_id: str) -> None:
        self.trial, self.metric, self.sweep_id = trial, objective.primary_metric, sweep_id
        self.reports = 0
        self.pruned_at: int | None = None
        self.control: RunControl | None = None
        self.run_id: str | None = None
        self.failure: Exception | None = None  # reporting to the study failed: its storage is gone
        self.lock = threading.Lock()

    def started(self, run_id: str, control: RunControl, store: Store) -> None:
        self.run_id, self.control = run_id, control
        self.trial.set_user_attr("run_id", run_id)
        store.update_run(run_id, sweep={"id": self.sweep_id, "trial": self.trial.number})

    def points(self, points: list[MetricPoint]) -> None:
        for point in points:
            if point.name != self.metric or point.source not in LIVE_SOURCES:
                continue
            with self.lock:
                if self.pruned_at is not None or self.failure is not None:
                    return
                self.reports += 1
                step = self.reports
                try:
                    self.trial.report(float(point.value), step)
                    prune = self.trial.should_prune()
                except Exception as exc:  # the storage went away: the sweep stops (SweepRunner raises it)
                    self.failure = exc
                    self.stop(f"the sweep's storage failed: {type(exc).__name__}")
                    return
                if prune:
                    self.pruned_at = step
                    self.control.reason = f"{EARLY_TERMINATION} at step {step}"
                    self.control.cancel.set()
                    return

    def stop(self, reason: str) -> None:
        """Cancel the run from outside (Ctrl-C on the sweep, the sweep's timeout)."""
        if self.control is not None and not self.control.cancel.is_set():
            self.control.reason = reason
            self.control.cancel.set()


def trial_manifest(loaded: LoadedManifest, values: dict[str, Any], objective: Objective, trial_timeout: int | None) -> LoadedManifest:
    """The manifest one trial runs: the sampled values as script_params, no sweep, the objective as
    the primary metric, no model registered (the sweep registers the best trial's), the trial's time limit."""
    manifest = loaded.manifest
    metrics = manifest.metrics.model_copy(update={"primary": objective.primary_metric, "goal": objective.goal})
    update = {
        "script_params": {**manifest.script_params, **values},
        "sweep": None,
        "metrics": metrics,
        "model": manifest.model.model_copy(update={"register_model": False}),
    }
    if trial_timeout is not None:
        update["max_run_duration_seconds"] = min(trial_timeout, manifest.max_run_duration_seconds or trial_timeout)
    return loaded.model_copy(update={"manifest": manifest.model_copy(update=update)})


def run_trial(loaded: LoadedManifest, watch: TrialWatch, log: Path, settings: Settings, home: Path) -> TrialResult:
    """Run it, its tftrain console written to `log` (the sweep shows a table, not every trial's lines)."""
    number = watch.trial.number
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as stream:
        logger = Logger(stream, settings=LoggerSettings())
        for name in loaded.manifest.secrets:  # as `tftrain run` does before it prints anything
            logger.mask(os.environ.get(name, ""))
        try:
            result = run_manifest(loaded, logger, settings, home, watch=watch)
        except FatalError as exc:  # refused before it ran (the run, if recorded, says so too)
            logger.error(str(exc))
            return TrialResult(number, watch.run_id, RunStatus.FAILED, None, False, str(exc))
        finally:
            logger.flush()
    metrics = (result.metrics or {}).get("metrics", {})
    value = metrics.get(watch.metric, {}).get("last")
    early = watch.pruned_at is not None and result.status == RunStatus.CANCELED
    return TrialResult(
        number, result.run_id, result.status, float(value) if isinstance(value, (int, float)) else None, early, result.message,
        tuple(sorted(metrics)),
    )
