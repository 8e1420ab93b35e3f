"""One trial of a sweep: a full tftrain run with the trial's values in its script_params, its
primary metric reported to the study as it is recorded, stopped when the policy prunes it."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.errors import FatalError
from runner.history.states import Cause, RunStatus
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.manifest.sweep import Objective
from runner.settings import LoggerSettings, Settings
from runner.sweep.outcome import TrialResult
from runner.targets.base import RunControl
from runner.telemetry.logger import Logger
from runner.telemetry.point import MetricPoint
from runner.training.pipeline import run_manifest

LIVE_SOURCES = ("log", "file")  # TensorBoard's points are read after the run: too late to prune with


class TrialWatch:
    """Reports the objective metric to the Optuna trial at each report (step = 1, 2, 3 …, HyperDrive's
    interval) and stops the run when the study's pruner says so. A multi-objective sweep's trial
    reports nothing while it runs: Optuna takes intermediate values (and prunes) for one objective only."""

    def __init__(self, trial, objectives: tuple[Objective, ...], sweep_id: str) -> None:
        self.trial, self.metric, self.sweep_id = trial, objectives[0].primary_metric, sweep_id
        self.objectives = tuple(objective.primary_metric for objective in objectives)
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
        if len(self.objectives) > 1:
            return
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
                    self.control.reason = f"{Cause.EARLY_TERMINATION} at step {step}"
                    self.control.cause = Cause.EARLY_TERMINATION
                    self.control.cancel.set()
                    return

    def stop(self, reason: str) -> None:
        """Cancel the run from outside (Ctrl-C on the sweep, the sweep's timeout)."""
        if self.control is not None and not self.control.cancel.is_set():
            self.control.reason = reason
            self.control.cancel.set()


def trial_manifest(
    loaded: LoadedManifest, values: dict[str, Any], objective: Objective, trial_timeout: int | None
) -> LoadedManifest:
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
    if manifest.evaluation is not None:  # every trial seeded alike: their evidence differs by the values alone
        from runner.manifest.evaluation import SEED_VARIABLE

        update["environment_variables"] = {**manifest.environment_variables, SEED_VARIABLE: "0"}
    if trial_timeout is not None:
        update["max_run_duration_seconds"] = min(trial_timeout, manifest.max_run_duration_seconds or trial_timeout)
    return loaded._replace(manifest=manifest.model_copy(update=update))


def run_trial(
    loaded: LoadedManifest, watch: TrialWatch, log: Path, settings: Settings, home: Path, environ: Mapping[str, str]
) -> TrialResult:
    """Run it, its tftrain console written to `log` (the sweep shows a table, not every trial's lines).
    `environ`: tftrain's environment, as the CLI handed it in (the secrets' values)."""
    number = watch.trial.number
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as stream:
        logger = Logger(stream, settings=LoggerSettings())
        logger.mask_secrets(loaded.manifest.secrets, environ)  # as `tftrain run` does before it prints anything
        try:
            result = run_manifest(loaded, logger, settings, home, watch=watch)
        except FatalError as exc:  # refused before it ran (the run, if recorded, says so too)
            logger.error(str(exc))
            return TrialResult(number, watch.run_id, RunStatus.FAILED, None, False, str(exc))
        finally:
            logger.flush()
    metrics = (result.metrics or {}).get("metrics", {})
    early = watch.pruned_at is not None and result.status == RunStatus.CANCELED
    return TrialResult.of_run(number, result.run_id, result.status, metrics, watch.objectives, early, result.message)
