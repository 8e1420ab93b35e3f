"""What a trial's run did, as the study is told it: the verdict read from the run record (the one
truth of a trial's state) and the one way a trial's state is set. Apart from trial.py so that reading
a sweep (book.py, study.py) never imports the pipeline that runs one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from runner.errors import extra_module
from runner.history.record import Cause, RunRecord, RunStatus


class Verdict(Enum):
    """What the study is told about a trial, read from what its run did: the run record is the one
    truth of a trial's state, the study (and the sweep's table) follow it."""

    COMPLETE = "complete"  # completed with a value of every objective
    PRUNED = "pruned"  # stopped by the early-termination policy
    FAILED = "failed"  # failed, out of its time, or completed without an objective
    STOPPED = "stopped"  # canceled from outside (a signal, its sweep halted) or lost: told FAIL, resume runs it again


@dataclass(frozen=True)
class TrialResult:
    number: int
    run_id: str | None
    status: RunStatus
    value: float | None  # the objective: the primary metric's last value (the first objective's)
    early_terminated: bool  # its run's cause: the policy stopped it (never read from a message)
    message: str | None
    reported: tuple[
        str, ...
    ] = ()  # the metric names the run recorded (to say which exist when the objective is not among them)
    lost: bool = False  # its tftrain was killed (RunRecord.lost): a trial run here, by this process, never is
    values: tuple[
        float | None, ...
    ] = ()  # a multi-objective sweep: each objective's last value, in the manifest's order
    missing: tuple[str, ...] = ()  # objectives a completed run never reported: the trial failed

    @classmethod
    def of_run(
        cls,
        number: int,
        run_id: str | None,
        status: RunStatus,
        metrics: Mapping[str, object],
        objectives: Sequence[str],
        early_terminated: bool,
        message: str | None,
        lost: bool = False,
    ) -> TrialResult:
        """`metrics`: the run's summary (name → {"last": …} or MetricStats); `objectives`: the metric
        names the sweep is told, the first its primary metric. A run that completed without one of
        them failed as a trial, and its message says which."""
        values = tuple(_last(metrics.get(name)) for name in objectives)
        missing = tuple(name for name in objectives if name not in metrics) if status == RunStatus.COMPLETED else ()
        if missing:
            seen = ", ".join(sorted(metrics)) or "none"
            message = f"completed without reporting {', '.join(map(repr, missing))}; it reported: {seen}"
        return cls(
            number,
            run_id,
            status,
            values[0],
            early_terminated,
            message,
            tuple(sorted(metrics)),
            lost,
            values if len(objectives) > 1 else (),
            missing,
        )

    @classmethod
    def of_record(cls, number: int, record: RunRecord, objectives: Sequence[str]) -> TrialResult:
        """What a finished run did, as its trial's result (a study that could not be told is told from this)."""
        metrics = record.metrics.metrics if record.metrics else {}
        early = record.status == RunStatus.CANCELED and record.cause == Cause.EARLY_TERMINATION
        return cls.of_run(
            number, record.run_id, record.status, metrics, objectives, early, record.message, lost=record.lost
        )

    @property
    def shown_status(self) -> RunStatus:
        """The trial's status in the table: a trial out of time (trial_timeout) was canceled, as
        HyperDrive says; its run says TimedOut. One that completed without an objective failed."""
        if self.missing:
            return RunStatus.FAILED
        return RunStatus.CANCELED if self.status == RunStatus.TIMED_OUT else self.status

    @property
    def verdict(self) -> Verdict:
        if self.status == RunStatus.COMPLETED and self.value is not None and not self.missing:
            return Verdict.COMPLETE
        if self.early_terminated:
            return Verdict.PRUNED
        # canceled from outside, or lost (its tftrain was killed: the record says so, RunRecord.lost)
        lost = self.status == RunStatus.FAILED and self.lost
        return Verdict.STOPPED if self.status == RunStatus.CANCELED or lost else Verdict.FAILED


def _last(stats: object) -> float | None:
    last = stats.get("last") if isinstance(stats, Mapping) else getattr(stats, "last", None)
    return float(last) if isinstance(last, (int, float)) and not isinstance(last, bool) else None


def tell(study, trial, result: TrialResult) -> Verdict:
    """Record `result` on `trial` (an optuna Trial) and end it in the study: the one way a trial's
    state is set, live or when a resumed sweep catches up with runs that ended unseen. A
    multi-objective study is told every objective's value."""
    state = extra_module("optuna", "sweep", "a sweep").trial.TrialState
    trial.set_user_attr("status", result.shown_status.value)
    trial.set_user_attr("early_terminated", result.early_terminated)
    trial.set_user_attr("message", result.message)
    verdict = result.verdict
    if verdict == Verdict.COMPLETE:
        study.tell(trial, list(result.values) if result.values else result.value)
    else:
        study.tell(trial, state=state.PRUNED if verdict == Verdict.PRUNED else state.FAIL)
    return verdict
