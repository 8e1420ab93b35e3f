"""What a trial's run did, as the study is told it: the verdict read from the run record (the one
truth of a trial's state) and the one way a trial's state is set. Apart from trial.py so that reading
a sweep (book.py, study.py) never imports the pipeline that runs one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from runner.errors import extra_module
from runner.history.record import RunRecord, RunStatus

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
    lost: bool = False  # its tftrain was killed (RunRecord.lost): a trial run here, by this process, never is

    @classmethod
    def of_record(cls, number: int, record: RunRecord, metric: str) -> TrialResult:
        """What a finished run did, as its trial's result (a study that could not be told is told from this)."""
        stats = record.metrics.metrics.get(metric) if record.metrics else None
        value = stats.last if stats is not None and isinstance(stats.last, (int, float)) else None
        early = record.status == RunStatus.CANCELED and (record.message or "").startswith(EARLY_TERMINATION)
        return cls(number, record.run_id, record.status, value, early, record.message, lost=record.lost)

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
        # canceled from outside, or lost (its tftrain was killed: the record says so, RunRecord.lost)
        lost = self.status == RunStatus.FAILED and self.lost
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
