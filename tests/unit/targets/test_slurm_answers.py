"""Slurm's commands as hostile, slow or missing programs, without a cluster: `subprocess.run` in
runner.targets.slurm.jobs replaced by a scripted one that behaves as the real one does with the
arguments it is given (text=True decodes strictly, a timeout raises TimeoutExpired)."""

from __future__ import annotations

import io
import subprocess
import threading
import time
from pathlib import Path

import pytest

from runner.errors import ClusterError, ManifestError
from runner.settings import LoggerSettings
from runner.targets.slurm import jobs
from runner.targets.slurm import watch as watch_module
from runner.targets.slurm.gpus import gpus_allocated, long_name
from runner.targets.slurm.jobs import JobInfo, JobState
from runner.targets.slurm.script import BatchRequest
from runner.targets.slurm.watch import JobWatch
from runner.telemetry.logger import Logger

NAME, COMMENT = "tftrain-demo-1", "tftrain:0123456789abcdef"


class Slurm:
    """Each program's scripted answer: (returncode, stdout bytes, stderr bytes), "hang", or "missing"."""

    def __init__(self, monkeypatch, **answers) -> None:
        self.answers, self.calls = answers, []
        monkeypatch.setattr(jobs.subprocess, "run", self.run)
        monkeypatch.setattr(jobs, "require", lambda program="sbatch": program)
        monkeypatch.setattr(
            jobs.shutil, "which", lambda program: None if answers.get(program) == "missing" else f"/usr/bin/{program}"
        )

    def run(self, argv, **options):
        program = Path(argv[0]).name
        self.calls.append([program, *argv[1:]])
        answer = self.answers.get(program, (0, b"", b""))
        if callable(answer):
            answer = answer(argv)
        if answer == "missing":
            raise FileNotFoundError(2, "No such file or directory")
        if answer == "hang":
            raise subprocess.TimeoutExpired(argv, options.get("timeout"))
        code, out, err = answer
        if options.get("text") or options.get("encoding") or options.get("errors"):
            errors = options.get("errors") or "strict"
            out, err = out.decode("utf-8", errors), err.decode("utf-8", errors)
        return subprocess.CompletedProcess(argv, code, out, err)


def test_sbatch_test_only_refusal_that_is_not_utf8(monkeypatch):
    Slurm(monkeypatch, sbatch=(1, b"", b"sbatch: error: invalid partition specified: gp\xff\xfeu\n"))
    with pytest.raises(ManifestError, match="compute.slurm.partition") as refused:
        jobs.test_only(["--partition=gpu"], "tftrain.yml")
    assert "\ufffd" in str(refused.value)


def test_scontrol_and_the_jobcomp_answers_that_are_not_utf8(monkeypatch, tmp_path):
    line = b"JobId=7 JobName=tftrain-\xe9t\xe9 JobState=RUNNING Reason=None ExitCode=0:0 Comment=\xff\n"
    Slurm(monkeypatch, scontrol=(0, line, b""))
    assert jobs.job_info("7", lambda: None) == JobInfo(JobState.RUNNING, "", 0, 0)
    Slurm(monkeypatch, scontrol=(0, b"JobCompType=jobcomp/filetxt\nJobCompLoc=/var/\xff/jobcomp\n", b""))
    assert jobs.jobcomp_file() == Path("/var/\ufffd/jobcomp")


def submit(warned: list[str]) -> str:
    return jobs.submit(Path("/runs/demo-1/launch/slurm.sh"), {}, "compute.slurm", NAME, COMMENT, warned.append)


def squeue_lists(*lines: str):
    return (0, "".join(line + "\n" for line in lines).encode(), b"")


@pytest.mark.parametrize(
    "sbatch",
    [
        (0, b"8\xff\n", b""),
        "hang",
        (1, b"", b"sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"),
    ],
    ids=["not-utf8", "no-answer", "controller-timeout"],
)
def test_a_submission_sbatch_does_not_confirm_is_found_and_adopted(monkeypatch, sbatch):
    slurm = Slurm(monkeypatch, sbatch=sbatch, squeue=squeue_lists(f"8|{COMMENT}", "9|tftrain:another-home"))
    warned: list[str] = []
    assert submit(warned) == "8"
    (said,) = warned
    assert "Slurm job 8 (tftrain-demo-1) is in the queue: tftrain supervises it" in said and "\n" not in said
    (squeue,) = [call for call in slurm.calls if call[0] == "squeue"]
    assert squeue[squeue.index("-n") + 1] == NAME and "-t" in squeue  # ended ones too: a job may be over already
    assert not any(call[0] == "scancel" for call in slurm.calls)


def test_an_unconfirmed_submission_not_in_the_queue_fails_the_run(monkeypatch):
    Slurm(monkeypatch, sbatch="hang", squeue=squeue_lists())
    with pytest.raises(ClusterError, match=r"sbatch did not answer in 30 s.*no job of that name is in the queue"):
        submit([])


def test_unconfirmed_submissions_found_twice_are_both_canceled(monkeypatch):
    slurm = Slurm(monkeypatch, sbatch=(0, b"garbage", b""), squeue=squeue_lists(f"8|{COMMENT}", f"10|{COMMENT}"))
    with pytest.raises(ClusterError, match="jobs 8, 10 of that name were canceled"):
        submit([])
    assert [call for call in slurm.calls if call[0] == "scancel"] == [["scancel", "8"], ["scancel", "10"]]


def test_an_unconfirmed_submission_when_squeue_does_not_answer_either(monkeypatch):
    Slurm(monkeypatch, sbatch="hang", squeue="hang")
    with pytest.raises(
        ClusterError, match=r"whether job tftrain-demo-1 was submitted is not known.*squeue --me -n tftrain-demo-1"
    ):
        submit([])


def test_a_refusal_of_the_request_is_no_submission(monkeypatch):
    slurm = Slurm(monkeypatch, sbatch=(1, b"", b"sbatch: error: invalid partition specified: nope\n"))
    with pytest.raises(ManifestError):
        submit([])
    assert [call[0] for call in slurm.calls] == ["sbatch"]  # nothing to look for


JOBCOMP = (
    b"JobId=7 UserId=root(0) JobState=COMPLETED StartTime=2026-11-28T14:26:02 EndTime=2026-11-28T14:26:04"
    b" ExitCode=0:0\n"
)
FORGOTTEN = (1, b"", b"slurm_load_jobs error: Invalid job id specified\n")


@pytest.mark.parametrize("sacct", ["missing", "hang", (1, b"", b"Slurm accounting storage is disabled\n")])
def test_a_forgotten_job_without_sacct_is_judged_by_its_jobcomp_record(monkeypatch, tmp_path, sacct):
    """`cannot run sacct` ended the run (exit 7) while the job had completed."""
    (tmp_path / "jobcomp.txt").write_bytes(JOBCOMP)
    Slurm(monkeypatch, scontrol=FORGOTTEN, sacct=sacct)
    assert jobs.job_info("7", lambda: tmp_path / "jobcomp.txt") == JobInfo(JobState.COMPLETED, "", 0, 0, 2.0)
    assert jobs.job_info("7", lambda: None) is None  # nothing knows it: the watch judges by the exit files


def test_an_array_task_not_in_its_array_is_unknown_to_slurmctld(monkeypatch):
    """scontrol's answer for a task scanceled while PENDING beside others (Slurm drops its index from
    the array's record: no record of its own, none in sacct): not a controller's failure."""
    Slurm(monkeypatch, scontrol=(1, b"Job 7_1 not found\n", b""), sacct=(0, b"", b""))
    assert jobs.job_info("7_1", lambda: None) is None
    Slurm(monkeypatch, scontrol=(1, b"Job 7_2 not found\n", b""))  # another task's answer is none about this one
    with pytest.raises(ClusterError, match="scontrol show job 7_1"):
        jobs.job_info("7_1", lambda: None)


def test_sacct_and_scontrol_give_the_jobs_own_time(monkeypatch):
    Slurm(monkeypatch, scontrol=FORGOTTEN, sacct=(0, b"CANCELLED by 0|0:15|93\n", b""))
    assert jobs.job_info("7", lambda: None) == JobInfo(JobState.CANCELLED, "", 0, 15, 93.0)
    running = b"JobId=7 JobState=RUNNING StartTime=2026-11-28T14:26:02 EndTime=2027-11-28T14:26:02 ExitCode=0:0\n"
    Slurm(monkeypatch, scontrol=(0, running, b""))
    assert jobs.job_info("7", lambda: None).elapsed is None  # a running job's EndTime is its limit
    done = b"JobId=7 JobState=FAILED StartTime=2026-11-28T14:26:02 EndTime=2026-11-28T14:27:00 ExitCode=1:0\n"
    Slurm(monkeypatch, scontrol=(0, done, b""))
    assert jobs.job_info("7", lambda: None).elapsed == 58.0
    bad = b"JobId=7 JobState=FAILED StartTime=Unknown EndTime=2026-11-28T14:27:00 ExitCode=1:0\n"
    Slurm(monkeypatch, scontrol=(0, bad, b""))
    assert jobs.job_info("7", lambda: None).elapsed is None


class Hung:
    """jobs.job_info that does not return until released (a hung scontrol), then raises jobs.Silent."""

    def __init__(self, monkeypatch) -> None:
        self.release, self.asked = threading.Event(), 0
        monkeypatch.setattr(watch_module.jobs, "job_info", self.info)

    def info(self, job_id, jobcomp):
        self.asked += 1
        self.release.wait(10)
        raise jobs.Silent("scontrol did not answer in 30 s: is slurmctld running?")


def watch_of(job_dir: Path, console: io.StringIO) -> JobWatch:
    return JobWatch("7", job_dir, None, False, Logger(console, settings=LoggerSettings()))


def test_a_hung_scontrol_holds_neither_the_watch_nor_the_queue(monkeypatch, tmp_path):
    """A 2 s job stayed Running 152 s: each question to a hung scontrol held the run."""
    from runner.targets.base import RunControl

    monkeypatch.setattr(watch_module, "STATE_EVERY", 0.01)
    hung = Hung(monkeypatch)
    watch = watch_of(tmp_path, io.StringIO())
    try:
        begun = time.monotonic()
        assert watch.state() is None and watch.state() is None
        (tmp_path / "batch.log").write_text("")  # Slurm started the batch script
        assert watch.queue(RunControl("TFTRAIN_RUN_ID=demo-1", 1.0), 3600) is None  # it runs: no need of scontrol
        time.sleep(0.2)
        watch.decided()  # its tasks' exit files
        assert time.monotonic() - begun < 2.0 and hung.asked == 1  # one question out at a time
        assert watch.final_state() is None  # not waited for either
        assert 0.15 <= watch.allocated_seconds() < 1.0  # the job's time as tftrain saw it, not the wait
    finally:
        hung.release.set()


def test_the_first_scheduler_failure_warns_once(monkeypatch, tmp_path):
    monkeypatch.setattr(watch_module, "STATE_EVERY", 0.0)
    hung = Hung(monkeypatch)
    hung.release.set()  # each question fails at once
    console = io.StringIO()
    watch = watch_of(tmp_path, console)
    for _ in range(5):
        watch.state(fresh=True)
    watch.logger.flush()
    said = [line for line in console.getvalue().splitlines() if "did not answer" in line]
    assert len(said) == 1 and hung.asked == 5, console.getvalue()
    assert (
        "slurm job 7: scontrol did not answer in 30 s" in said[0]
        and "judges the job by its tasks' exit files" in said[0]
    )


def test_a_question_not_yet_answered_is_no_silence(monkeypatch, tmp_path):
    """Every run said 'scontrol did not answer in 35 s' at once: the first look found no answer yet."""
    monkeypatch.setattr(watch_module, "STATE_EVERY", 0.0)
    hung = Hung(monkeypatch)
    console = io.StringIO()
    watch = watch_of(tmp_path, console)
    try:
        for _ in range(3):
            assert watch.state() is None
        watch.logger.flush()
        assert "did not answer" not in console.getvalue(), console.getvalue()
        monkeypatch.setattr(watch_module, "ASK_SECONDS", 0.05)  # … until the question is out that long
        time.sleep(0.1)
        watch.state()
        watch.state()
        watch.logger.flush()
        said = [line for line in console.getvalue().splitlines() if "did not answer" in line]
        assert len(said) == 1, console.getvalue()
    finally:
        hung.release.set()


def test_slurms_own_elapsed_time_is_the_allocation(monkeypatch, tmp_path):
    monkeypatch.setattr(
        watch_module.jobs, "job_info", lambda job_id, jobcomp: JobInfo(JobState.COMPLETED, "", 0, 0, 2.0)
    )
    watch = watch_of(tmp_path, io.StringIO())
    assert watch.allocated_seconds() is None  # never seen running
    assert watch.state(fresh=True).state == JobState.COMPLETED and watch.allocated_seconds() == 2.0


def request(*extra: str, nodes: int = 2, ntasks: int = 4, gpus_per_node: int = 0) -> BatchRequest:
    return BatchRequest("tftrain-x", COMMENT, nodes, ntasks, ntasks // nodes, 1, gpus_per_node, 0, 30, (), tuple(extra))


@pytest.mark.parametrize(
    ("req", "gpus"),
    [
        (request(), 0),
        (request(gpus_per_node=2), 4),  # tftrain's own --gres=gpu:2 on each of 2 nodes
        (request("--gpus-per-socket=2", "--sockets-per-node=2"), 8),
        (request("--gpus-per-so=1", "--sockets-per=2"), 4),  # getopt's unambiguous prefixes
        (request("--tres-per-task=gres/gpu:1"), 4),
        (request("--tres-per-task=cpu=2,gres/gpu:a100=2"), 8),
        (request("--tres-per-task=gres/gpu"), 4),
        (request("--tres-per-task=gres/gpu:a100:3"), 12),
        (request("--tres-per-task=cpu=4"), 0),
        (request("--gpus-per-socket=1", "--sockets-per-node=1", gpus_per_node=2), 4),  # the largest floor
        (request("--mem-per-gpu=4G", "--cpus-per-gpu=2", "--gres-flags=enforce-binding"), 0),
    ],
)
def test_every_gpu_request_form_is_counted(req, gpus):
    assert gpus_allocated(req) == gpus


def test_the_forms_tftrain_refuses_in_extra_args_count_all_the_same():
    from dataclasses import replace

    base = request()
    for extra, gpus in [
        (("--gres=gpu:tesla:2,mps:100",), 4),
        (("--gres=gpu",), 2),
        (("--gres=gpu:v100",), 2),
        (("--gpus=3",), 3),
        (("-G",), 0),
        (("-G5",), 5),
        (("--gpus=a100:6",), 6),
        (("--gpus-per-node=3",), 6),
        (("--gpus-per-task=2",), 8),
    ]:
        assert gpus_allocated(replace(base, extra_args=extra)) == gpus, extra
    assert long_name("gpus-per") is None and long_name("gpus") == "gpus" and long_name("tres") == "tres-per-task"
