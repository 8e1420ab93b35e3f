"""sacct's record set against tftrain's own view of the run (runner.targets.slurm.crosscheck): the
disagreements a user must know about, one line each, and the differences that are legitimate (a job
tftrain stopped, a requeued job, a Ctrl-C) that say nothing."""

from __future__ import annotations

import pytest

from runner.history.states import RunStatus
from runner.history.usage import Allocation, Usage, usage_from
from runner.targets.base import Outcome
from runner.targets.slurm.accounting import said
from runner.targets.slurm.crosscheck import SAYS, Check, RunView, checked, cross_check
from runner.targets.slurm.jobs import JobState
from runner.telemetry.usage_report import usage_markdown, usage_rows

SUCCEEDED = Outcome(RunStatus.COMPLETED, 0, None)
TASK_FAILED = Outcome(RunStatus.FAILED, 137, "rank 0 exited with code 137 (killed by SIGKILL)", 0)
CANCELED = Outcome(RunStatus.CANCELED, None, "canceled by a signal to tftrain; Slurm job 42 was canceled")
TIMED_OUT = Outcome(RunStatus.TIMED_OUT, None, "max_run_duration_seconds (60s) reached; Slurm job 42 was canceled")


def view(outcome: Outcome = SUCCEEDED, **changes) -> RunView:
    fields = {
        "tasks_failed": outcome.status == RunStatus.FAILED,
        "stopped": False,
        "requeued": False,
        "gpus_asked": 1,
        "seen_seconds": 30.0,
        "slurm_said": None,
    }
    return RunView(outcome, **{**fields, **changes})


def record(state: str = "COMPLETED", exit_code: str = "0:0", **changes) -> Allocation:
    fields = {"elapsed_seconds": 31.0, "cpus": 2, "gpus": 1}
    return Allocation(source="sacct", job_id="42", state=state, exit_code=exit_code, **{**fields, **changes})


def lines(seen: RunView, allocation: Allocation) -> list[str]:
    outcome, findings = cross_check("42", seen, allocation)
    assert outcome == seen.outcome, "only a failure's message is changed"
    return [found.warning for found in findings]


def test_agreement_says_nothing_and_is_recorded():
    outcome, findings = cross_check("42", view(), record())
    assert (outcome, findings) == (SUCCEEDED, [])
    allocation = checked(record(), findings)
    assert allocation.disagreements == [] and allocation.agreement() == "agrees with tftrain's view"
    assert said(allocation).endswith("; agrees with tftrain's view")


@pytest.mark.parametrize(
    ("state", "exit_code"), [("OUT_OF_MEMORY", "0:125"), ("NODE_FAIL", "0:0"), ("FAILED", "1:0"), ("TIMEOUT", "0:0")]
)
def test_a_success_slurm_recorded_as_a_failure_warns(state, exit_code):
    assert lines(view(), record(state, exit_code)) == [
        f"{SAYS}: tftrain judged the run Completed by its tasks' exit status, but Slurm recorded {state}"
        f" (exit {exit_code}) for job 42"
    ]


@pytest.mark.parametrize("state", ["CANCELLED", "FAILED", "TIMEOUT", "COMPLETED"])
def test_a_success_whose_rest_tftrain_stopped_ends_as_the_stop_left_it(state):
    """The parameter servers, stopped once the workers succeeded: CANCELLED, or FAILED (their SIGTERM
    is srun's exit status), in Slurm; their exit files say -15."""
    assert lines(view(stopped=True, tasks_failed=True), record(state, "0:15")) == []


def test_a_success_canceled_from_outside_after_the_tasks_ended_says_nothing():
    assert lines(view(), record("CANCELLED", "0:15")) == []
    assert lines(view(), record("PREEMPTED", "0:15")) == []


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL"])
def test_a_clusters_fault_warns_even_when_tftrain_stopped_the_job(state):
    (line,) = lines(view(stopped=True), record(state))
    assert f"but Slurm recorded {state} (exit 0:0) for job 42" in line
    for outcome in (CANCELED, TIMED_OUT):
        (line,) = lines(view(outcome, stopped=True), record(state))
        assert f"tftrain judged the run {outcome.status}, but Slurm recorded {state}" in line


def test_failed_exit_files_slurm_recorded_as_completed_warns():
    assert lines(view(TASK_FAILED), record()) == [
        f"{SAYS}: tftrain judged the run Failed by its tasks' exit status, but Slurm recorded COMPLETED (exit 0:0)"
        " for job 42"
    ]
    # tftrain stopped the rest after the failure: the job's end is that stop's
    assert lines(view(TASK_FAILED, stopped=True), record()) == []
    assert lines(view(TASK_FAILED), record("FAILED", "137:0")) == []
    assert lines(view(TASK_FAILED, stopped=True), record("CANCELLED", "0:15")) == []


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT", "DEADLINE", "BOOT_FAIL"])
def test_a_failure_slurm_explains_says_slurms_reason_first(state):
    outcome, findings = cross_check("42", view(TASK_FAILED), record(state, "0:9"))
    assert findings == []
    assert outcome == TASK_FAILED._replace(
        message=f"Slurm recorded {state} for job 42; rank 0 exited with code 137 (killed by SIGKILL)"
    )


def test_a_failure_slurms_state_already_decided_is_not_said_twice():
    from_slurm = Outcome(RunStatus.FAILED, None, "Slurm job 42 ran out of memory")  # watch.ending_of
    seen = view(from_slurm, tasks_failed=False, slurm_said=JobState.OUT_OF_MEMORY)
    assert cross_check("42", seen, record("OUT_OF_MEMORY", "0:125")) == (from_slurm, [])
    vanished = Outcome(RunStatus.FAILED, None, "ended without an exit code: Slurm no longer knows job 42", taken=True)
    outcome, _ = cross_check("42", view(vanished, slurm_said=JobState.RUNNING), record("NODE_FAIL"))
    assert (
        outcome.message
        == "Slurm recorded NODE_FAIL for job 42; ended without an exit code: Slurm no longer knows job 42"
    )
    assert outcome.taken


@pytest.mark.parametrize("state", ["CANCELLED", "FAILED", "COMPLETED", "TIMEOUT"])
def test_a_job_tftrain_canceled_or_timed_out_says_nothing(state):
    for outcome in (CANCELED, TIMED_OUT):
        assert lines(view(outcome, stopped=True, tasks_failed=True), record(state)) == []
    assert (
        lines(view(CANCELED, seen_seconds=None), record("CANCELLED", gpus=None, cpus=None, elapsed_seconds=0.0)) == []
    )


@pytest.mark.parametrize("state", ["PREEMPTED", "NODE_FAIL", "REQUEUED"])
def test_a_requeued_jobs_way_back_to_pending_says_nothing(state):
    assert lines(view(requeued=True), record(state)) == []
    # its Elapsed is every start's (sacct -D), as tftrain's count is: set against each other all the same
    assert lines(view(requeued=True, seen_seconds=905.0), record(elapsed_seconds=900.0)) == []
    assert len(lines(view(requeued=True, seen_seconds=900.0), record(elapsed_seconds=120.0))) == 1


def test_gpus_slurm_held_other_than_asked_warn_once():
    assert lines(view(gpus_asked=0), record(gpus=2)) == [
        f"{SAYS}: job 42 held 2 GPUs (AllocTRES gres/gpu), the request asked for 0; the run's GPU-hours count 0"
    ]
    (line,) = lines(view(gpus_asked=2), record(gpus=1))
    assert "held 1 GPU (AllocTRES gres/gpu), the request asked for 2" in line
    # no gres/gpu in AllocTRES: the cluster does not track it, or the job held none; no figure is no disagreement
    assert lines(view(gpus_asked=2), record(gpus=None)) == []
    assert lines(view(gpus_asked=0), record(gpus=None)) == []


@pytest.mark.parametrize(
    ("slurm", "seen", "warns"),
    [(31.0, 30.0, False), (10.0, 69.0, False), (10.0, 71.0, True), (1000.0, 1190.0, False), (1000.0, 1300.0, True)],
)
def test_elapsed_far_from_tftrains_clock_warns(slurm, seen, warns):
    found = lines(view(seen_seconds=seen), record(elapsed_seconds=slurm))
    assert found == (
        [
            f"{SAYS}: job 42 ran {slurm:g} s by Slurm's clock (Elapsed), {seen:.0f} s by tftrain's; the run's usage counts"
            " Slurm's"
        ]
        if warns
        else []
    )
    assert lines(view(seen_seconds=None), record(elapsed_seconds=slurm)) == []


def test_every_disagreement_at_once_each_once_in_order():
    _, findings = cross_check("42", view(gpus_asked=0, seen_seconds=500.0), record("NODE_FAIL", gpus=2))
    assert [found.check for found in findings] == [Check.STATE, Check.GPUS, Check.ELAPSED]
    allocation = checked(record("NODE_FAIL", gpus=2), findings)
    assert allocation.disagreements == [found.line for found in findings]
    assert allocation.agreement().startswith("3 disagreements with tftrain's view: tftrain judged the run Completed")


@pytest.mark.parametrize("source", ["scontrol", "tftrain"])
def test_figures_not_saccts_are_not_checked(source):
    allocation = Allocation(source=source, job_id="42", state="OUT_OF_MEMORY", elapsed_seconds=5.0, gpus=3)
    assert cross_check("42", view(TASK_FAILED, gpus_asked=0), allocation) == (TASK_FAILED, [])
    assert checked(allocation, []).disagreements is None and allocation.agreement() is None


@pytest.mark.parametrize("state", ["", "WHATEVER", "CANCELLED by 0", "\x00\xff", "PENDING", "RUNNING"])
def test_any_state_word_is_no_traceback(state):
    for outcome in (SUCCEEDED, TASK_FAILED, CANCELED, TIMED_OUT):
        cross_check("42", view(outcome), record(state, ""))
        cross_check("42", view(outcome), Allocation(source="sacct"))


def test_the_record_keeps_the_check_and_an_older_one_reads_as_unchecked():
    usage = Usage(wall_seconds=31.0, processes=1, cpu_seconds=31.0, allocation=checked(record(gpus=2), []))
    assert usage.as_dict()["allocation"]["disagreements"] == []
    assert usage_from(usage.as_dict()) == usage
    older = usage.as_dict()
    del older["allocation"]["disagreements"]
    assert usage_from(older).allocation.disagreements is None
    assert ["Slurm accounting (sacct)", "agrees with tftrain's view"] in usage_rows(usage)
    assert not any(row[0] == "Slurm accounting (sacct)" for row in usage_rows(usage_from(older)))


def test_a_hostile_records_findings_stay_one_cell_of_the_table():
    hostile = record(disagreements=["a | b\n| injected | row |"])
    text = usage_markdown(Usage(wall_seconds=1.0, processes=1, cpu_seconds=1.0, allocation=hostile))
    (row,) = [line for line in text.splitlines() if line.startswith("| Slurm accounting")]
    assert row.count("|") == 3 and "injected" in row and len(text.splitlines()) == len(set(text.splitlines()))
