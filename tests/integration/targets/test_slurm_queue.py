"""A Slurm job that waits in the queue, on the real two-node cluster: the run is Queued with Slurm's
pending reason (run.json, `tftrain runs`) until the job starts, then Running, its time limit counted
from then; Ctrl-C while pending cancels the job (Canceled, never Running); past
compute.queue_timeout_seconds the job is canceled and the run fails. The job is held with
`extra_args: [--hold]` (Slurm's reason: JobHeldUser) and let go with `scontrol release`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from slurming import show_job, slurm_manifest
from test_slurm_stops import background
from watching import run_status, until

pytestmark = pytest.mark.integration

HELD = "    extra_args: [--hold]\n"


def record(home: Path, run_id: str = "demo-1") -> dict:
    try:
        return json.loads((home / "runs" / run_id / "run.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return {}


def held_job(home: Path) -> str:
    """Wait for the run to be Queued behind its held job; the job's id, from the reason."""
    until(
        lambda: "JobHeldUser" in (record(home).get("message") or ""),
        "the run to be Queued with Slurm's reason",
        timeout=120,
    )
    run = record(home)
    assert run["status"] == "Queued", run
    assert [phase["phase"] for phase in run["phases"]] == ["Preparing", "Queued"], run["phases"]
    reason = run["phases"][-1]["reason"]
    match = re.fullmatch(r"Slurm job (\d+): PENDING \(JobHeldUser\)", reason)
    assert match, reason
    return match[1]


@contextmanager
def ended(process: subprocess.Popen, cli):
    """A run that a failed assertion leaves behind is killed, and its held job canceled (the next
    command finds the run lost): nothing of it is left in the shared cluster's queue."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
            cli("runs")


def in_squeue(job: str) -> bool:
    """The job is still in the queue (the cluster is shared with other tests: only this job counts)."""
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30).stdout
    return bool(out.strip())


def test_queued_while_pending_then_running_with_the_time_limit_from_then(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project, "import time\ntime.sleep(1)\nprint('done', flush=True)\n", "max_run_duration_seconds: 4\n", slurm=HELD
    )
    process = background(path)
    with ended(process, cli):
        job = held_job(home)
        listed = cli("runs")
        assert f"Slurm job {job}: PENDING (JobHeldUser)" in listed.stdout, listed.stdout
        time.sleep(5)  # longer than max_run_duration_seconds, all of it in the queue
        assert record(home)["status"] == "Queued" and in_squeue(job)
        subprocess.run(["scontrol", "release", job], check=True, timeout=30)
        out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out[-3000:]
    run = record(home)
    assert run["status"] == "Completed" and run["message"] is None, run
    phases = {phase["phase"]: phase for phase in run["phases"]}
    assert list(phases) == ["Preparing", "Queued", "Running", "PostProcessing", "Completed"]
    # the last reason Slurm gave (released, the job may wait a moment for the scheduler: Reason=None)
    assert re.fullmatch(
        rf"Slurm job {job}: PENDING \((JobHeldUser|no reason given|Priority|Resources)\)", phases["Queued"]["reason"]
    )
    assert "reason" not in phases["Running"]
    assert phases["Running"]["started"] - phases["Queued"]["started"] >= 5  # Running began when the job did
    assert phases["Queued"]["ended"] == phases["Running"]["started"]
    assert f"slurm job {job}: Queued (PENDING: JobHeldUser)" in out and f"slurm job {job}: RUNNING" in out


def test_ctrl_c_while_pending_cancels_the_job(project, cli, home, slurm_cluster):
    path = slurm_manifest(project, "print('never', flush=True)\n", slurm=HELD)
    process = background(path)
    with ended(process, cli):
        job = held_job(home)
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 12, out[-3000:]  # Canceled
    assert f"while queued; Slurm job {job} was canceled" in out, out[-3000:]
    assert not in_squeue(job) and "JobState=CANCELLED" in show_job(job)
    run = record(home)
    assert run_status(home, "demo-1") == "Canceled" == run["status"]
    assert [phase["phase"] for phase in run["phases"]] == [
        "Preparing",
        "Queued",
        "PostProcessing",
        "Canceled",
    ]  # it never ran
    assert (
        not (home / "runs/demo-1/workdir/logs/0.log").exists()
        or "never" not in (home / "runs/demo-1/workdir/logs/0.log").read_text()
    )


def test_pending_past_the_queue_timeout_fails_the_run(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project, "print('never', flush=True)\n", "  queue_timeout_seconds: 2\n", slurm=HELD
    )  # under compute:
    result = cli("run", "-f", str(path), timeout=120)
    assert result.returncode == 19, result.stdout[-2000:] + result.stderr  # PlacementError
    words = re.search(
        r"compute\.queue_timeout_seconds \(2s\) passed and Slurm job (\d+) is still PENDING \(JobHeldUser\); it was"
        r" canceled",
        result.stdout + result.stderr,
    )
    assert words, result.stdout[-2000:] + result.stderr
    job = words[1]
    assert not in_squeue(job) and "JobState=CANCELLED" in show_job(job)
    run = record(home)
    assert run["status"] == "Failed" and "queue_timeout_seconds" in run["message"]
    assert [phase["phase"] for phase in run["phases"]] == ["Preparing", "Queued", "PostProcessing", "Failed"]
