"""Real preemption on the two-node cluster (scripts/slurm-up: partition `low` is preempted by `high`,
PreemptMode=REQUEUE, GraceTime=20, preempt_send_user_signal): a training that outlives
one job (compute.slurm.time_limit) is requeued, the same job, and resumes from its backup, each
epoch finished once; one without a time limit is taken away and `retry:` resumes it from its last
checkpoint in a new job. The preemptor is a job of partition `high` that needs both nodes."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from requeuing import EPOCHS, KERAS, Running, logged
from slurming import STEPS, show_job, slurm_manifest, submitted
from watching import run_status

pytestmark = pytest.mark.integration


def preempt(seconds: int = 10) -> str:
    """A job of partition `high` over both nodes: Slurm preempts whatever of `low` holds them."""
    done = subprocess.run(
        ["sbatch", "--parsable", "--partition=high", "--nodes=2", "--exclusive", "--job-name=zz-preemptor"]
        + ["--output=/dev/null", f"--wrap=sleep {seconds}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip().split(";")[0]


def preempted(path, tmp_path, home, reached: str, timeout: int) -> tuple[str, int, str]:
    """`tftrain run` of `path`, preempted once its rank 0 log shows `reached`: (its first job, its exit
    code, its output)."""
    preemptor = None
    try:
        with Running(path, tmp_path / "out.txt") as run:
            job = run.job()
            run.until(lambda log: reached in log, 240, f"the training never reached {reached!r}", logged(home))
            preemptor = preempt()
            return job, run.wait(timeout=timeout), run.text()
    finally:
        if preemptor:
            subprocess.run(["scancel", preemptor], capture_output=True, timeout=30)


def test_a_preempted_training_is_requeued_and_resumes_from_its_backup(project, home, tmp_path, slurm_cluster):
    path = slurm_manifest(
        project,
        KERAS,
        "max_run_duration_seconds: 900\nstop_grace_seconds: 10\n",
        slurm="    partition: low\n    time_limit: 10\n",
    )
    job, code, out = preempted(path, tmp_path, home, "epoch 5 finished", timeout=400)
    assert code == 0, out[-4000:]
    assert submitted(out) == [job]  # the same job, requeued
    assert "disagrees with tftrain" not in out, out[-4000:]  # its record is its last start's: legitimately so
    assert f"slurm job {job} requeued (preemption) — restart 1" in out, out[-4000:]
    log = logged(home)()
    assert re.findall(rf"^start (\d+) of job {job}$", log, re.M) == ["0", "1"], log[-3000:]
    finished = re.findall(r"^epoch (\d+) finished$", log, re.M)
    assert finished == [str(epoch) for epoch in range(1, EPOCHS + 1)], log[-3000:]  # each once, in order
    assert "leaving for the requeue" in log and "training done" in log
    kept = (home / "runs/demo-1/workdir/logs/slurm.log").read_text()
    assert f"slurm job {job}: preemption: the tasks stop, the job is requeued (restart 1)" in kept, kept
    assert run_status(home, "demo-1") == "Completed"
    assert re.search(r"JobState=COMPLETED .*Restarts=1 ", show_job(job)), show_job(job)
    # the usage is both starts' (sacct -D), not the last start's that Slurm's own record keeps
    usage = re.search(
        rf"usage from Slurm accounting \(sacct\): job {job} COMPLETED exit 0:0, (\d+) s over 2 starts", out
    )
    assert usage is not None, out[-2000:]
    allocation = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]["allocation"]
    assert allocation["starts"] == 2 and allocation["elapsed_seconds"] == float(usage.group(1)) >= 20, allocation


def test_a_preempted_job_without_a_time_limit_is_retried_from_its_checkpoint(project, home, tmp_path, slurm_cluster):
    path = slurm_manifest(
        project, STEPS, "retry: {max_attempts: 2}\nstop_grace_seconds: 5\n", slurm="    partition: low\n"
    )
    _, code, out = preempted(path, tmp_path, home, "step 25", timeout=300)
    assert code == 0, out[-4000:]
    assert run_status(home, "demo-1") == "Failed" and run_status(home, "demo-2") == "Completed", out[-3000:]
    assert re.search(r"PREEMPTED|preempted", out), out[-3000:]
    assert "disagrees with tftrain" not in out, out[-3000:]  # PREEMPTED is what tftrain judged the first by
    second = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    first_step = int(re.search(r"^first step (\d+)$", second, re.M)[1])
    assert first_step >= 21 and first_step % 10 == 1, second[:500]  # from a checkpoint after step 25, not the start
    assert len(submitted(out)) == 2
