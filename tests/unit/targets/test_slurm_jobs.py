"""What Slurm answers, read without a cluster: job states and how a run ends by them, sbatch's
refusals as tftrain's errors, the jobcomp file and exit files as hostile text."""

from __future__ import annotations

import pytest

from runner.errors import ClusterError, ManifestError, PlacementError
from runner.history.record import RunStatus
from runner.targets.slurm.jobs import JobInfo, JobState, from_jobcomp, info_from, judge_refusal, parse_fields
from runner.targets.slurm.watch import ending_of, read_exit
from runner.github.routing import runs_on
from runner.manifest.model import Manifest


def test_states_and_what_ended_them():
    assert JobState.parse("CANCELLED by 0") == JobState.CANCELLED  # sacct's form
    assert JobState.parse("COMPLETED+") == JobState.COMPLETED
    assert JobState.parse("RESV_DEL_HOLD") == JobState.OTHER and not JobState.OTHER.ended
    assert JobState.parse("") == JobState.OTHER
    assert not JobState.PENDING.ended and not JobState.COMPLETING.ended and JobState.NODE_FAIL.ended
    assert {state for state in JobState if state.taken} == {JobState.CANCELLED, JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL}


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
    line = "JobId=7 JobName=tftrain-m-1 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 Comment=a=b JobState=COMPLETED"
    fields = parse_fields(line)
    assert fields["Comment"] == "a=b" and fields["JobState"] == "FAILED"  # the first of a repeated key
    assert info_from(fields) == JobInfo(JobState.FAILED, "NonZeroExitCode", 3, 0)
    assert info_from(parse_fields("JobState=PENDING Reason=None ExitCode=garbage")) == JobInfo(JobState.PENDING, "", None, None)


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
    assert read_exit(tmp_path / "0") == -15
    assert read_exit(tmp_path / "1") is None and read_exit(tmp_path / "2") is None and read_exit(tmp_path / "3") is None


@pytest.mark.parametrize(
    ("stderr", "error", "words"),
    [
        ("sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition name specified", ManifestError, "compute.slurm.partition"),
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", ManifestError, "compute.slurm.account"),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", ManifestError, "compute.slurm.qos"),
        ("allocation failure: Requested node configuration is not available", PlacementError, "can never run"),
        ("allocation failure: Unable to contact slurm controller (connect failure)", ClusterError, "slurmctld does not answer"),
        ("sbatch: error: something new\n", ClusterError, "something new"),
        ("", ClusterError, "no reason given"),
    ],
)
def test_sbatch_refusals(stderr, error, words):
    refusal = judge_refusal(stderr, "tftrain.yml")
    assert type(refusal) is error and words in str(refusal) and "\n" not in str(refusal)


def test_a_login_node_runner():
    manifest = Manifest.model_validate({"name": "m", "entry_script": "t.py", "use_gpu": True, "compute": {"target": "slurm", "runner_labels": ["hpc"]}})
    assert runs_on(manifest) == ["self-hosted", "linux", "slurm", "hpc"]  # the GPUs are the cluster's, not the runner's
