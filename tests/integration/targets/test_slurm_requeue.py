"""compute.slurm.time_limit on the real two-node cluster. Slurm's limit signal (USR1 to the batch
shell, `--signal=B:USR1@N`) is sent by the test with `scancel --batch --signal=USR1` when the
training is where the test wants it: what the batch script does with it is then deterministic
(the tasks stop, the same job is requeued and resumes from its BackupAndRestore backup, each epoch
finished once; a requeue Slurm refuses cancels the job and fails the run in one line). One test
waits for Slurm's own timer (slurmctld checks limits every 30 s; a requeued job waits cred_expire,
30 s in scripts/slurm-up, before it starts again)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from requeuing import EPOCHS, KERAS, Running, limit_signal, logged
from slurming import show_job, slurm_manifest, submitted
from watching import run_status

pytestmark = pytest.mark.integration

SIGNALED = ((0, 3), (1, 13), (2, 20))  # (start, after epoch): the limit's signal, three times


def test_a_training_stopped_at_three_time_limits_resumes_each_time(project, home, tmp_path, slurm_cluster):
    path = slurm_manifest(
        project, KERAS, "max_run_duration_seconds: 600\nstop_grace_seconds: 10\n", slurm="    time_limit: 1\n"
    )
    with Running(path, tmp_path / "out.txt") as run:
        job = run.job()
        for start, epoch in SIGNALED:
            reached = f"start {start} of job {job}", f"epoch {epoch} finished"
            run.until(
                lambda log, reached=reached: all(line in log for line in reached), 240, f"never {reached}", logged(home)
            )
            limit_signal(job, ran=7)  # past 60 s - 10 s (stop_grace) - 45 s: the limit's, not a preemption's
        code = run.wait(timeout=400)
        out = run.text()
    assert code == 0, out[-4000:]
    assert submitted(out) == [job]  # one job, however often it started
    assert "disagrees with tftrain" not in out, out[-4000:]  # sacct's Elapsed is the last start's: not compared
    restarts = [int(number) for number in re.findall(rf"slurm job {job} requeued \(time limit\) — restart (\d+)", out)]
    assert len(restarts) >= 3 and restarts == list(range(1, len(restarts) + 1)), out[
        -4000:
    ]  # Slurm's limit may add one
    log = logged(home)()
    starts = re.findall(rf"^start (\d+) of job {job}$", log, re.M)
    assert starts == [str(number) for number in range(len(restarts) + 1)], log[-3000:]
    finished = re.findall(r"^epoch (\d+) finished$", log, re.M)
    assert finished == [str(epoch) for epoch in range(1, EPOCHS + 1)], log[-3000:]  # each once, in order
    assert log.count("leaving for the requeue") == len(restarts) and "training done" in log
    kept = (home / "runs/demo-1/workdir/logs/slurm.log").read_text()  # the batch script's, in the run's logs
    for restart in (1, 2, 3):
        assert f"slurm job {job}: time limit: the tasks stop, the job is requeued (restart {restart})" in kept, kept
    assert run_status(home, "demo-1") == "Completed"
    assert re.search(rf"JobState=COMPLETED .*Restarts={len(restarts)} ", show_job(job)), show_job(job)


REFUSING_SCONTROL = """\
#!/bin/sh
# scontrol, but for `requeue`, which Slurm refuses (as a cluster with requeue disabled for users would)
if [ "$1" = requeue ]; then
  echo "slurm_requeue error: Requested operation is presently disabled" >&2
  exit 1
fi
exec {real} "$@"
"""

SLEEPER = (
    "import os, time\nprint('training', os.environ.get('SLURM_RESTART_COUNT', '0'), flush=True)\ntime.sleep(300)\n"
)


def test_a_requeue_slurm_refuses_fails_the_run_in_one_line(project, home, tmp_path: Path, slurm_cluster):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "scontrol"
    wrapper.write_text(REFUSING_SCONTROL.format(real=shutil.which("scontrol")))
    wrapper.chmod(0o755)
    path = slurm_manifest(
        project, SLEEPER, "max_run_duration_seconds: 300\nstop_grace_seconds: 5\n", slurm="    time_limit: 1\n"
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "300"}
    with Running(path, tmp_path / "out.txt", env) as run:
        job = run.job()
        run.until(lambda log: "training" in log, 120, "the training never started", logged(home))
        limit_signal(job, ran=12)  # past 60 s - 5 s (stop_grace) - 45 s
        code = run.wait(timeout=200)
        out = run.text()
    assert code != 0 and "Traceback" not in out, out[-3000:]
    assert (
        f"Slurm refused to requeue job {job} at its time limit (scontrol requeue: slurm_requeue error: Requested"
        " operation is presently disabled); the job was canceled" in out
    ), out[-3000:]
    assert run_status(home, "demo-1") == "Failed"
    assert re.search(r"JobState=(FAILED|CANCELLED) .*Restarts=0 ", show_job(job)), show_job(job)


def test_slurms_own_time_limit_requeues_and_max_run_duration_ends_the_job(project, cli, home, slurm_cluster):
    """Slurm's timer, not the test, sends the signal; tftrain's own limit counts over every start of
    the job, its queue between them included: at it the job is canceled wherever it is."""
    path = slurm_manifest(
        project, SLEEPER, "max_run_duration_seconds: 110\nstop_grace_seconds: 5\n", slurm="    time_limit: 1\n"
    )
    result = cli("run", "-f", str(path), timeout=400)
    out = result.stdout + result.stderr
    jobs = submitted(out)
    for job in jobs:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
    assert result.returncode == 11, out[-3000:]  # TimedOut
    (job,) = jobs
    assert f"slurm job {job} requeued (time limit) — restart 1" in out, out[-3000:]
    assert "max_run_duration_seconds (110s) reached; Slurm job" in out and "Traceback" not in out, out[-3000:]
    assert run_status(home, "demo-1") == "TimedOut"
    assert re.search(r"JobState=(CANCELLED|FAILED|COMPLETED) ", show_job(job)), show_job(job)  # not in squeue


SAVING_EPOCHS = 10
SLOW_SAVE = f"""\
import json, os, time
import numpy as np
import keras

restart = os.environ.get("SLURM_RESTART_COUNT", "0")


class SlowBackup(keras.callbacks.BackupAndRestore):
    \"\"\"Keras' backup, its two writes (the weights, then the epoch they belong to) apart, once.\"\"\"

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        self.model.save_weights(self._weights_path, overwrite=True)
        if self._current_epoch == 4 and restart == "0":
            print("backup of epoch 4: weights written", flush=True)
            time.sleep(8)
        with open(self._training_metadata_path, "w") as handle:
            handle.write(json.dumps({{"epoch": self._current_epoch, "batch": self._last_batch_seen}}))


class Paced(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.05)

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {{epoch + 1}} finished", flush=True)


print(f"start {{restart}}", flush=True)
x = np.random.default_rng(0).normal(size=(320, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x.sum(axis=1), batch_size=32, epochs={SAVING_EPOCHS}, verbose=0, callbacks=[Paced(), SlowBackup("backup")])
print("training done", flush=True)
"""


def test_the_limits_signal_during_the_backups_save_waits_for_the_save(project, home, tmp_path, slurm_cluster):
    """A script with no SIGTERM handler of its own, stopped between the two writes of its backup: the
    stop waits for the backup to be whole (runner/compat/startup), so the next start resumes after
    epoch 4, not from epoch 3's record with epoch 4's weights (epoch 4 trained twice)."""
    path = slurm_manifest(
        project, SLOW_SAVE, "max_run_duration_seconds: 400\nstop_grace_seconds: 10\n", slurm="    time_limit: 1\n"
    )
    with Running(path, tmp_path / "out.txt") as run:
        job = run.job()
        run.until(lambda log: "backup of epoch 4: weights written" in log, 240, "no slow backup", logged(home))
        limit_signal(job, ran=7)
        code = run.wait(timeout=300)
        out = run.text()
    assert code == 0, out[-4000:]
    assert f"slurm job {job} requeued (time limit) — restart 1" in out, out[-4000:]
    log = logged(home)()
    assert "SIGTERM came while Keras' callbacks saved; it takes effect now" in log, log[-3000:]
    assert re.findall(r"^start (\d+)$", log, re.M) == ["0", "1"], log[-3000:]
    finished = re.findall(r"^epoch (\d+) finished$", log, re.M)
    assert finished == [str(epoch) for epoch in range(1, SAVING_EPOCHS + 1)], log[-3000:]  # epoch 4 once
    assert "training done" in log and run_status(home, "demo-1") == "Completed"
