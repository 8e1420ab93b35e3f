"""What Slurm answers, read without a cluster: job states and how a run ends by them, sbatch's
refusals as tftrain's errors, the jobcomp file and exit files as hostile text."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest

from runner.errors import ClusterError, ManifestError, PlacementError
from runner.github.routing import runs_on
from runner.history.states import RunStatus
from runner.manifest.model import Manifest
from runner.settings import LoggerSettings
from runner.targets.base import RunControl
from runner.targets.slurm import watch as watch_module
from runner.targets.slurm.jobs import JobInfo, JobState, from_jobcomp, info_from, judge_refusal, parse_fields
from runner.targets.slurm.watch import JobWatch, ending_of, read_exit
from runner.telemetry.logger import Logger


def test_states_and_what_ended_them():
    assert JobState.parse("CANCELLED by 0") == JobState.CANCELLED  # sacct's form
    assert JobState.parse("COMPLETED+") == JobState.COMPLETED
    assert JobState.parse("RESV_DEL_HOLD") == JobState.OTHER and not JobState.OTHER.ended
    assert JobState.parse("") == JobState.OTHER
    assert not JobState.PENDING.ended and not JobState.COMPLETING.ended and JobState.NODE_FAIL.ended
    assert {state for state in JobState if state.taken} == {
        JobState.CANCELLED,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
    }


@pytest.mark.parametrize(
    ("info", "status", "taken", "words"),
    [
        (JobInfo(JobState.TIMEOUT), RunStatus.TIMED_OUT, False, "time limit"),
        (JobInfo(JobState.DEADLINE), RunStatus.TIMED_OUT, False, "time limit"),
        (JobInfo(JobState.CANCELLED), RunStatus.FAILED, True, "outside tftrain"),
        (JobInfo(JobState.NODE_FAIL), RunStatus.FAILED, True, "NODE_FAIL"),
        (JobInfo(JobState.PREEMPTED), RunStatus.FAILED, True, "PREEMPTED"),
        (JobInfo(JobState.OUT_OF_MEMORY), RunStatus.FAILED, False, "out of memory"),
        (JobInfo(JobState.FAILED, exit_code=3), RunStatus.FAILED, False, "(exit code 3)"),
        (JobInfo(JobState.COMPLETED, exit_code=0), RunStatus.FAILED, False, "before every task reported"),
    ],
)
def test_a_job_that_ended_without_its_tasks_deciding(info, status, taken, words):
    outcome = ending_of(info, "42")
    assert outcome.status == status and outcome.taken is taken and words in outcome.message and "42" in outcome.message


def test_scontrol_fields():
    line = (
        "JobId=7 JobName=tftrain-m-1 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 Comment=a=b JobState=COMPLETED"
    )
    fields = parse_fields(line)
    assert fields["Comment"] == "a=b" and fields["JobState"] == "FAILED"  # the first of a repeated key
    assert info_from(fields) == JobInfo(JobState.FAILED, "NonZeroExitCode", 3, 0)
    assert info_from(parse_fields("JobState=PENDING Reason=None ExitCode=garbage")) == JobInfo(
        JobState.PENDING, "", None, None
    )


def test_the_jobcomp_record_as_hostile_text(tmp_path):
    path = tmp_path / "jobcomp.txt"
    path.write_bytes(
        b"JobId=71 UserId=root(0) JobState=COMPLETED ExitCode=0:0\n"
        b"\xff\xfe not a record\n"
        b"JobId=7 UserId=root(0) JobState=FAILED ExitCode=2:0\n"
        b"JobId=7 UserId=root(0) JobState=NODE_FAIL ExitCode=0:9\n"
        b"JobId=7"  # cut short
    )
    assert from_jobcomp("7", path) == JobInfo(JobState.NODE_FAIL, "", 0, 9)  # the last record of job 7, not 71's
    assert from_jobcomp("8", path) is None
    assert from_jobcomp("7", tmp_path / "missing") is None


def test_exit_files_as_hostile_text(tmp_path):
    (tmp_path / "0").write_text("-15\n")
    (tmp_path / "1").write_text("x" * 100000)
    (tmp_path / "2").mkdir()
    (tmp_path / "4").write_bytes(b"\xff\xfe0")  # not UTF-8: no UnicodeDecodeError
    assert read_exit(tmp_path / "0") == -15
    assert read_exit(tmp_path / "4") is None
    assert read_exit(tmp_path / "1") is None and read_exit(tmp_path / "2") is None and read_exit(tmp_path / "3") is None


@pytest.mark.parametrize(
    ("stderr", "error", "words"),
    [
        (
            "sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition name specified",
            ManifestError,
            "compute.slurm.partition",
        ),
        (
            "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
            ManifestError,
            "compute.slurm.account",
        ),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", ManifestError, "compute.slurm.qos"),
        ("allocation failure: Requested node configuration is not available", PlacementError, "can never run"),
        (
            "allocation failure: Unable to contact slurm controller (connect failure)",
            ClusterError,
            "slurmctld does not answer",
        ),
        (
            "sbatch: error: QOSMaxGRESPerJob\nallocation failure: Job violates accounting/QOS policy (job submit limit,"
            " user's size and/or time limits)",
            PlacementError,
            "tftrain.yml: compute.slurm.qos: the job is over a limit of its QoS (QOSMaxGRESPerJob): ask for less",
        ),
        ("sbatch: error: QOSMaxWallDurationPerJobLimit\n", PlacementError, "(QOSMaxWallDurationPerJobLimit)"),
        ("sbatch: error: something new\n", ClusterError, "something new"),
        ("", ClusterError, "no reason given"),
    ],
)
def test_sbatch_refusals(stderr, error, words):
    refusal = judge_refusal(stderr, "tftrain.yml")
    assert type(refusal) is error and words in str(refusal) and "\n" not in str(refusal)


def test_a_login_node_runner():
    manifest = Manifest.model_validate(
        {"name": "m", "entry_script": "t.py", "use_gpu": True, "compute": {"target": "slurm", "runner_labels": ["hpc"]}}
    )
    assert runs_on(manifest) == ["self-hosted", "linux", "slurm", "hpc"]  # the GPUs are the cluster's, not the runner's


class Queue:
    """Slurm's answers about one job, without a cluster: PENDING with `reasons` in turn (the last
    one kept), then `then` — or CANCELLED once scancel was called."""

    def __init__(self, monkeypatch, reasons: list[str], then: JobState | None = None, after: int = 0) -> None:
        self.reasons, self.then, self.after, self.asked, self.canceled = reasons, then, after, 0, []
        monkeypatch.setattr(watch_module, "STATE_EVERY", 0.01)
        monkeypatch.setattr(watch_module.jobs, "job_info", self.info)
        monkeypatch.setattr(
            watch_module.jobs, "cancel", lambda job_id, signal_name=None: self.canceled.append((job_id, signal_name))
        )

    def info(self, job_id: str, jobcomp) -> JobInfo:
        assert job_id == "7"
        self.asked += 1
        if self.canceled:
            return JobInfo(JobState.CANCELLED)
        if self.then is not None and self.asked > self.after:
            return JobInfo(self.then)
        return JobInfo(JobState.PENDING, self.reasons[min(self.asked, len(self.reasons)) - 1])


def queue_watch() -> JobWatch:
    return JobWatch("7", Path("/nonexistent"), None, False, Logger(io.StringIO(), settings=LoggerSettings()))


def told_control(told: list[str]) -> RunControl:
    control = RunControl("TFTRAIN_RUN_ID=demo-1", 1.0)
    control.queued = told.append
    return control


def test_a_pending_job_is_queued_with_each_new_reason_until_it_runs(monkeypatch):
    # each reason for three questions: the watch asks in a thread of its own and reads the newest
    # answer, so a reason Slurm gave for one question only may be passed over on a loaded machine
    reasons = [""] * 3 + ["Priority"] * 3 + ["Resources"] * 3
    slurm = Queue(monkeypatch, reasons, then=JobState.RUNNING, after=len(reasons) + 2)
    told: list[str] = []
    assert queue_watch().queue(told_control(told), 3600) is None
    assert told == [
        "Slurm job 7: PENDING (no reason given)",
        "Slurm job 7: PENDING (Priority)",
        "Slurm job 7: PENDING (Resources)",
    ]
    assert slurm.canceled == []


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.COMPLETED, JobState.FAILED])
def test_a_job_that_never_pended_is_never_queued(monkeypatch, state):
    Queue(monkeypatch, ["Priority"], then=state)
    told: list[str] = []
    assert queue_watch().queue(told_control(told), 0) is None and told == []


def test_canceled_while_pending(monkeypatch):
    slurm = Queue(monkeypatch, ["JobHeldUser"])
    told: list[str] = []
    control = told_control(told)
    control.queued = lambda reason: (told.append(reason), control.cancel.set())
    outcome = queue_watch().queue(control, 3600)
    assert outcome.status == RunStatus.CANCELED and "while queued; Slurm job 7 was canceled" in outcome.message
    assert slurm.canceled == [("7", None)]  # nothing ran: no grace, no signal to tasks, scancel at once
    assert told == ["Slurm job 7: PENDING (JobHeldUser)"]


def test_a_job_slurm_has_not_looked_at_yet_is_not_failed_by_a_zero_timeout(monkeypatch):
    """Right after sbatch every job is PENDING with Reason=None, also on an idle cluster."""
    slurm = Queue(monkeypatch, [""], then=JobState.RUNNING, after=3)
    assert queue_watch().queue(told_control([]), 0) is None and slurm.canceled == []
    monkeypatch.setattr(watch_module, "UNSEEN_SECONDS", 0.05)
    never = Queue(monkeypatch, [""])  # … but not forever
    with pytest.raises(PlacementError, match=r"still PENDING \(no reason given\)"):
        queue_watch().queue(told_control([]), 0)
    assert never.canceled == [("7", None)]


def test_pending_past_the_queue_timeout_fails_and_is_canceled(monkeypatch):
    slurm = Queue(monkeypatch, ["Resources"])
    with pytest.raises(
        PlacementError,
        match=r"compute\.queue_timeout_seconds \(0s\) passed and Slurm job 7 is still PENDING \(Resources\)",
    ):
        queue_watch().queue(told_control([]), 0)
    assert slurm.canceled == [("7", None)]


def test_a_pending_reason_is_hostile_text(monkeypatch):
    """scontrol's Reason is the cluster's text: one printable line, cut short, in the record and on the console."""
    Queue(monkeypatch, ["(evil)\x1b[2J\u202e" + "x" * 5000])
    told: list[str] = []
    with pytest.raises(PlacementError) as refused:
        queue_watch().queue(told_control(told), 0)
    (reason,) = told
    assert reason.isprintable() and "\\x1b[2J" in reason and len(reason) < 300, reason
    assert str(refused.value).isprintable() and len(str(refused.value)) < 500


class Answers:
    """Slurm's answers about job 7 in turn, the last one kept; None: nothing knows the job (Vanished)."""

    def __init__(self, monkeypatch, answers: list[JobInfo | None]) -> None:
        self.answers, self.asked, self.canceled = answers, 0, []
        monkeypatch.setattr(watch_module, "STATE_EVERY", 0.01)
        monkeypatch.setattr(watch_module.jobs, "job_info", self.info)
        monkeypatch.setattr(watch_module.jobs, "cancel", lambda job_id, signal_name=None: self.canceled.append(job_id))

    def info(self, job_id: str, jobcomp) -> JobInfo | None:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


def pending(reason: str, times: int = 3) -> list[JobInfo]:
    return [JobInfo(JobState.PENDING, reason)] * times


@pytest.mark.parametrize(
    "answers, words",
    [
        # an array task scanceled while PENDING: scontrol keeps its last reason
        (
            [*pending("BeginTime"), JobInfo(JobState.CANCELLED, "BeginTime")],
            "Slurm job 7 was canceled while PENDING (BeginTime), before it started (scancel from outside tftrain)",
        ),
        (  # … or says none: the last one the watch saw
            [*pending("JobHeldAdmin"), JobInfo(JobState.CANCELLED, "")],
            "Slurm job 7 was canceled while PENDING (JobHeldAdmin), before it started",
        ),
        ([JobInfo(JobState.CANCELLED)], "Slurm job 7 was canceled while PENDING (no reason given), before it started"),
        (
            [*pending("Priority"), JobInfo(JobState.DEADLINE, "DeadLine")],
            "Slurm job 7 ended DEADLINE while PENDING (DeadLine), before it started",
        ),
    ],
)
def test_a_job_slurm_ended_before_it_started_fails_in_one_line(monkeypatch, tmp_path, answers, words):
    slurm = Answers(monkeypatch, answers)
    watch = JobWatch("7", tmp_path, None, False, Logger(io.StringIO(), settings=LoggerSettings()))
    with pytest.raises(PlacementError) as failed:
        watch.queue(told_control([]), 3600)
    assert str(failed.value).startswith(words) and "\n" not in str(failed.value), failed.value
    assert slurm.canceled == []  # nothing is left of it to cancel


@pytest.mark.parametrize(
    "answers, words",
    [
        ([None], "Slurm does not list job 7: it never started"),
        ([*pending("Priority"), None], "Slurm no longer lists job 7 (last seen PENDING (Priority)): it never started"),
    ],
)
def test_a_job_slurm_forgot_before_it_started_fails_in_one_line(monkeypatch, tmp_path, answers, words):
    """An array task scanceled while PENDING beside others: scontrol, sacct and jobcomp know nothing of it."""
    slurm = Answers(monkeypatch, answers)
    watch = JobWatch("7", tmp_path, None, False, Logger(io.StringIO(), settings=LoggerSettings()))
    with pytest.raises(
        PlacementError, match=re.escape(words + " (a scancel while it was pending, or Slurm forgot it)")
    ):
        watch.queue(told_control([]), 3600)
    assert slurm.canceled == []


@pytest.mark.parametrize("last", [JobInfo(JobState.CANCELLED, "None"), None])
def test_a_job_that_ran_between_two_questions_is_judged_by_the_watch(monkeypatch, tmp_path, last):
    """Its batch.log says it started: canceled or forgotten after that, its exit files decide."""
    Answers(monkeypatch, [*pending("Resources"), last])
    (tmp_path / "batch.log").write_text("")
    watch = JobWatch("7", tmp_path, None, False, Logger(io.StringIO(), settings=LoggerSettings()))
    assert watch.queue(told_control([]), 3600) is None


def test_a_task_asking_a_controller_that_does_not_answer_for_its_node_address_goes_on(monkeypatch):
    """rank.py asks `scontrol show node` for a name that does not resolve: the call is bounded
    (SCONTROL_SECONDS), and a controller that never answers leaves the node's name standing."""
    from runner.targets.slurm import rank

    asked = []

    def never_answers(argv, **options):
        asked.append(options.get("timeout"))
        raise subprocess.TimeoutExpired(argv, options.get("timeout"))

    monkeypatch.setattr(rank.subprocess, "run", never_answers)
    assert rank.node_address("no-such-node.invalid") == "no-such-node.invalid"
    assert asked == [rank.SCONTROL_SECONDS]


def test_a_node_address_from_the_controller(monkeypatch):
    from runner.targets.slurm import rank

    shown = "NodeName=n9 NodeAddr=10.1.2.3 NodeHostName=n9\n"
    monkeypatch.setattr(rank.subprocess, "run", lambda argv, **options: subprocess.CompletedProcess(argv, 0, shown, ""))
    assert rank.node_address("no-such-node.invalid") == "10.1.2.3"


@pytest.mark.parametrize("scancel_answers", [True, False])
def test_stopping_a_job_slurmctld_no_longer_answers_about_is_not_taken_for_its_end(monkeypatch, scancel_answers):
    """A silent controller is not a job Slurm forgot: the stop still sends scancel and the console
    says the job may run on (it was taken as 'gone', nothing sent, nothing said)."""
    import threading

    canceled = []

    def silent(job_id, jobcomp):
        raise ClusterError("squeue did not answer in 30 s: is slurmctld running?")

    def cancel(job_id, signal_name=None):
        canceled.append((job_id, signal_name))
        if not scancel_answers:
            raise ClusterError("scancel did not answer in 30 s: is slurmctld running?")

    monkeypatch.setattr(watch_module.jobs, "job_info", silent)
    monkeypatch.setattr(watch_module.jobs, "cancel", cancel)
    console = io.StringIO()
    watch = JobWatch("7", Path("/nonexistent"), None, False, Logger(console, settings=LoggerSettings()))
    watch.answered -= watch_module.SILENT_SECONDS + 1
    watch.stop(5.0, threading.Event())
    watch.logger.flush()
    assert canceled == [("7", None)]
    said = console.getvalue()
    assert "slurmctld stopped answering about job 7" in said
    assert (
        ("scancel 7 was sent" in said)
        if scancel_answers
        else ("job 7 may still be running: scancel 7 once slurmctld answers" in said)
    )
