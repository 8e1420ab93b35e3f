"""Stopping Slurm jobs, on the real two-node cluster: Ctrl-C (the run Canceled, nothing left in
squeue), tftrain's time limit (TimedOut), a scancel from outside (`retry:` resumes from the last
checkpoint in a new job), tftrain SIGKILLed (the next command cancels its job, never a second one),
and a sweep whose trials are Slurm jobs, at most max_concurrent_trials at once."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TFTRAIN
from slurming import STEPS, queued, show_job, slurm_manifest, submitted
from sweeping import show, sweep_manifest
from watching import run_status, until, wait_for

pytestmark = pytest.mark.integration


def background(path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def interrupted(path: Path, home: Path, line: str) -> str:
    """`tftrain run` in the background, Ctrl-C once its task printed `line`: its output, exit code 12 (Canceled)."""
    process = background(path)
    wait_for(home / "runs/demo-1/workdir/logs/0.log", line, timeout=120)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 12, out  # Canceled
    return out


def test_ctrl_c_cancels_the_job(project, home, slurm_cluster):
    path = slurm_manifest(project, STEPS, "stop_grace_seconds: 3\n")
    out = interrupted(path, home, "step 3")
    assert "run demo-1: Canceled" in out and "was canceled" in out, out
    # Slurm's CANCELLED (or FAILED: the task's SIGTERM) is tftrain's own stop: no disagreement
    assert "disagrees with tftrain" not in out and "; agrees with tftrain's view" in out, out
    (job,) = submitted(out)
    assert queued() == [], queued()
    assert re.search(r"JobState=(CANCELLED|COMPLETED|FAILED) ", show_job(job)), show_job(
        job
    )  # ended: the task died of the SIGTERM
    assert run_status(home, "demo-1") == "Canceled"


def test_the_time_limit_ends_the_job(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project,
        "import time\nprint('sleeping', flush=True)\ntime.sleep(120)\n",
        "max_run_duration_seconds: 3\nstop_grace_seconds: 1\n",
    )
    started = time.monotonic()
    result = cli("run", "-f", str(path), timeout=120)
    assert result.returncode == 11, result.stdout[-2000:] + result.stderr  # TimedOut
    assert "max_run_duration_seconds (3s) reached" in result.stderr + result.stdout
    assert "disagrees with tftrain" not in result.stdout + result.stderr  # the job ended as tftrain's stop left it
    assert time.monotonic() - started < 40
    assert queued() == []


def test_a_job_canceled_outside_tftrain_is_retried_from_its_checkpoint(project, home, slurm_cluster):
    path = slurm_manifest(project, STEPS, "retry: {max_attempts: 2}\nstop_grace_seconds: 2\n")
    process = background(path)
    wait_for(home / "runs/demo-1/workdir/logs/0.log", "step 25", timeout=120)
    (job,) = [
        line.split()[0]
        for line in subprocess.run(
            ["squeue", "-h", "-n", "tftrain-demo-1", "-o", "%i"], capture_output=True, text=True
        ).stdout.split("\n")
        if line
    ]
    subprocess.run(["scancel", job], check=True)  # the cluster takes the job away
    out, _ = process.communicate(timeout=180)
    assert process.returncode == 0, out[-3000:]
    assert run_status(home, "demo-1") == "Failed" and run_status(home, "demo-2") == "Completed"
    second = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    first_step = int(re.search(r"^first step (\d+)$", second, re.M)[1])
    assert first_step in (21, 31), second[:500]  # from the last checkpoint, not from the start
    assert len(submitted(out)) == 2 and queued() == []


def test_a_killed_tftrain_leaves_no_job_behind(project, cli, home, slurm_cluster):
    path = slurm_manifest(project, STEPS)
    process = background(path)
    wait_for(home / "runs/demo-1/workdir/logs/0.log", "step 2", timeout=120)
    assert len(queued("tftrain-demo-1")) == 1
    process.kill()
    process.communicate()
    result = cli("runs")  # the next command finds the run lost and cancels its job
    assert result.returncode == 0, result.stderr
    assert "canceled Slurm job" in result.stderr + result.stdout, result.stderr
    until(lambda: queued("tftrain-demo-1") == [], "the lost run's job to leave squeue", timeout=60)
    assert run_status(home, "demo-1") == "Failed"


TRACE = """\
import os, time
with open(os.environ["TRACE"], "a") as trace:
    trace.write(f"start {time.time()} {os.environ['SLURM_JOB_ID']}\\n")
"""


def test_a_sweep_runs_each_trial_as_a_job_two_at_a_time(project, cli, home, tmp_path, slurm_cluster):
    from sweeping import SCRIPT

    trace = tmp_path / "trace"
    path = sweep_manifest(project, steps=8, pause=0.3, trials=4, concurrent=2, script=TRACE + SCRIPT)
    path.write_text(
        path.read_text()
        + "user_managed: true\nmodel: {register: false}\ncompute:\n  target: slurm\n"
        + f"environment_variables:\n  TRACE: {trace}\n"
    )
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    trials = show(cli)["trials"]
    assert len(trials) == 4 and all(t["status"] == "Completed" for t in trials), trials
    jobs = set()
    for trial in trials:
        run = home / "runs" / trial["run_id"]
        assert (run / "launch/slurm.sh").is_file()
    for line in trace.read_text().splitlines():
        jobs.add(line.split()[2])
    assert len(jobs) == 4  # one Slurm job per trial
    spans = []
    for job in jobs:
        fields = dict(word.split("=", 1) for word in show_job(job).split() if "=" in word)
        spans.append((fields["StartTime"], fields["EndTime"]))
    most = max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)
    assert most <= 2, spans
    assert queued() == []


GRACEFUL = """\
import signal, sys, time
def leave(number, frame):
    print("got SIGTERM: saving", flush=True)
    time.sleep(1)
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, leave)
print("training", flush=True)
time.sleep(120)
"""


def test_the_stop_gives_the_tasks_their_grace(project, home, slurm_cluster):
    path = slurm_manifest(project, GRACEFUL, "stop_grace_seconds: 10\n")
    interrupted(path, home, "training")
    log = (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert "got SIGTERM: saving" in log and "saved" in log, log
    assert queued() == []


def test_early_termination_cancels_the_trials_job(project, cli, home, slurm_cluster):
    extra = "  early_termination: {type: bandit, slack_amount: 0.5, evaluation_interval: 1, delay_evaluation: 1}\n"
    path = sweep_manifest(project, steps=60, pause=0.2, sampling="grid", trials=2, concurrent=2, extra=extra)
    text = path.read_text().replace("[0.01, 0.05, 0.1, 0.2]", "[0.2, 0.01]").replace("[16, 64]", "[16]")
    path.write_text(
        text.replace("  --pause: 0.2\n", "  --pause: 0.2\n  --slow-below: 0.1\n")
        + "user_managed: true\nmodel: {register: false}\ncompute:\n  target: slurm\n"
    )
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    trials = {t["params"]["--lr"]: t for t in show(cli)["trials"]}
    assert trials[0.2]["status"] == "Completed"
    loser = trials[0.01]
    assert loser["status"] == "Canceled" and loser["early_terminated"] is True
    assert (
        "#SBATCH --job-name=tftrain-" + loser["run_id"]
        in (home / "runs" / loser["run_id"] / "launch/slurm.sh").read_text()
    )
    assert queued() == []
