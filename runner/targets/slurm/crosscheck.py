"""Slurm's accounting set against the run's own view, once the run's outcome is decided: sacct's
final State against tftrain's verdict (its tasks' exit files, its own stops), AllocTRES gres/gpu
against the GPUs the request asked for (what the run's GPU-hours count), sacct's Elapsed against
tftrain's clock. What a user must know is one warning line each, naming both sides and the job, and
is kept in the run record (usage.allocation.disagreements: [] where all agreed). Where Slurm's state
says better why a run failed (OUT_OF_MEMORY, NODE_FAIL, TIMEOUT, …) the failure's message starts
with it.

What is legitimately different says nothing: a job tftrain itself stopped (a Ctrl-C, its deadline,
the parameter servers once the workers decided, the rest after a task failed) ends CANCELLED or
FAILED in Slurm whatever its tasks did; a requeued job passes through PREEMPTED or NODE_FAIL on its
way back to PENDING (its Elapsed is every start's, sacct -D, as tftrain's count is)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from runner.history.states import RunStatus
from runner.history.usage import Allocation
from runner.targets.base import Outcome
from runner.targets.slurm.jobs import JobState

# Slurm's states of a job that did not end well by itself
FAULTS = frozenset(
    {
        JobState.FAILED,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.BOOT_FAIL,
        JobState.TIMEOUT,
        JobState.DEADLINE,
    }
)
CLUSTER_FAULTS = frozenset({JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.BOOT_FAIL})  # never tftrain's stop
# a failure's reason, better than a task's exit status or "ended without an exit code": every fault but FAILED
EXPLAINS = FAULTS - {JobState.FAILED}
REQUEUE_WAY = frozenset({JobState.PREEMPTED, JobState.NODE_FAIL, JobState.REQUEUED})
ELAPSED_FLOOR = 60.0  # seconds: Slurm's clock and tftrain's (its polls, the stop's grace) differ by a few
ELAPSED_SHARE = 0.2
SAYS = "Slurm accounting (sacct) disagrees with tftrain"


class Check(str, Enum):
    """What of sacct's record is set against tftrain's view."""

    STATE = "state"
    GPUS = "gpus"
    ELAPSED = "elapsed"


@dataclass(frozen=True, slots=True)
class RunView:
    """What tftrain saw of the job."""

    outcome: Outcome  # its verdict
    tasks_failed: bool  # a task's exit file says it failed (any status but 0)
    stopped: bool  # tftrain scancel'd the job: a Ctrl-C, its deadline, the rest once the tasks decided
    requeued: bool  # Slurm restarted the job: it passed through PREEMPTED / NODE_FAIL on the way
    gpus_asked: int  # runner.targets.slurm.gpus.gpus_allocated: what the run's GPU-hours count
    seen_seconds: float | None  # how long the job ran, as tftrain counted it (None: it never ran)
    slurm_said: JobState | None = None  # slurmctld's last word on the job, which an outcome not the tasks' came from


@dataclass(frozen=True, slots=True)
class Finding:
    check: Check
    line: str  # what differs, one line: the run record's

    @property
    def warning(self) -> str:
        return f"{SAYS}: {self.line}"


def cross_check(job_id: str, view: RunView, allocation: Allocation) -> tuple[Outcome, list[Finding]]:
    """The outcome (its message led by Slurm's reason where that explains a failure better) and what
    sacct's record says against tftrain's view; the outcome as it was, and nothing, where the record
    is not sacct's (slurmctld's or tftrain's own figures are what tftrain already judged by)."""
    if allocation.source != "sacct" or allocation.state is None:
        return view.outcome, []
    state = JobState.parse(allocation.state)
    findings = [
        found
        for found in (
            _state(job_id, state, allocation.exit_code, view),
            _gpus(job_id, allocation, view),
            _elapsed(job_id, allocation, view),
        )
        if found is not None
    ]
    return _explained(job_id, state, view), findings


def _state(job_id: str, state: JobState, exit_code: str | None, view: RunView) -> Finding | None:
    if state == JobState.OTHER or (view.requeued and state in REQUEUE_WAY):
        return None
    status = view.outcome.status
    recorded = f"Slurm recorded {state.value}" + (f" (exit {exit_code})" if exit_code else "") + f" for job {job_id}"
    if status == RunStatus.COMPLETED:
        # the tasks succeeded; a job tftrain stopped afterwards (parameter servers) ends CANCELLED or FAILED
        if state in CLUSTER_FAULTS or (state in FAULTS and not view.stopped):
            return Finding(Check.STATE, f"tftrain judged the run Completed by its tasks' exit status, but {recorded}")
        return None
    if status == RunStatus.FAILED:
        if state == JobState.COMPLETED and view.tasks_failed and not view.stopped:
            return Finding(Check.STATE, f"tftrain judged the run Failed by its tasks' exit status, but {recorded}")
        return None  # a failure Slurm explains better leads the run's message instead (_explained)
    # Canceled, TimedOut: tftrain stopped the job, which ends as that stop left it; a cluster's fault is news
    if state in CLUSTER_FAULTS:
        return Finding(Check.STATE, f"tftrain judged the run {status}, but {recorded}")
    return None


def _explained(job_id: str, state: JobState, view: RunView) -> Outcome:
    """A failure whose message says Slurm's reason first, where Slurm's state explains it and the
    message does not already come from that state (watch.ending_of, by slurmctld's word)."""
    outcome = view.outcome
    if outcome.status != RunStatus.FAILED or state not in EXPLAINS:
        return outcome
    by_tasks = outcome.rank is not None
    if not by_tasks and state == view.slurm_said:
        return outcome
    reason = f"Slurm recorded {state.value} for job {job_id}"
    return outcome._replace(message=f"{reason}; {outcome.message}" if outcome.message else reason)


def _gpus(job_id: str, allocation: Allocation, view: RunView) -> Finding | None:
    """AllocTRES names gres/gpu only where the cluster tracks it (AccountingStorageTRES) and the job
    held some: no figure is no disagreement."""
    held = allocation.gpus
    if held is None or held == view.gpus_asked:
        return None
    return Finding(
        Check.GPUS,
        f"job {job_id} held {held} GPU{'s' if held != 1 else ''} (AllocTRES gres/gpu), the request asked for"
        f" {view.gpus_asked}; the run's GPU-hours count {view.gpus_asked}",
    )


def _elapsed(job_id: str, allocation: Allocation, view: RunView) -> Finding | None:
    """sacct's Elapsed (every start's, for a requeued job) against tftrain's count of the same."""
    slurm, seen = allocation.elapsed_seconds, view.seen_seconds
    if slurm is None or seen is None:
        return None
    if abs(slurm - seen) <= max(ELAPSED_FLOOR, ELAPSED_SHARE * max(slurm, seen)):
        return None
    return Finding(
        Check.ELAPSED,
        f"job {job_id} ran {slurm:g} s by Slurm's clock (Elapsed), {seen:.0f} s by tftrain's; the run's usage"
        " counts Slurm's",
    )


def checked(allocation: Allocation, findings: list[Finding]) -> Allocation:
    """The allocation with what its cross-check found (only sacct's record is checked)."""
    if allocation.source != "sacct":
        return allocation
    return allocation.model_copy(update={"disagreements": [found.line for found in findings]})
