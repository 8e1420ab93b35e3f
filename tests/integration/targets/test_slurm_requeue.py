"""compute.slurm.time_limit on the real two-node cluster: a Keras training longer than one job may
run is requeued, the same job, at each time limit and resumes from its BackupAndRestore backup until
it is done (each epoch finished once); a requeue Slurm refuses cancels the job and fails the run in
one line. slurmctld checks limits every 30 s and a requeued job waits cred_expire (30 s, scripts/slurm-up)
before it starts again: these tests take minutes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TFTRAIN
from slurming import show_job, slurm_manifest, submitted
from watching import run_status

pytestmark = pytest.mark.integration

EPOCHS = 24  # 5 s each: two minutes of training; a one-minute job trains 20 to 50 s of it (USR1 up to 30 s early)

KERAS = f"""\
import os, signal, sys, time
import numpy as np
import keras

stopping = []
signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))


class Paced(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.25)  # 20 batches: 5 s an epoch
        if stopping:  # between two batches, never in the middle of the backup's save
            print(f"SIGTERM in epoch {{self.epoch + 1}}: leaving for the requeue", flush=True)
            os._exit(143)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {{epoch + 1}} finished", flush=True)


print(f"start {{os.environ.get('SLURM_RESTART_COUNT', '0')}} of job {{os.environ.get('SLURM_JOB_ID')}}", flush=True)
x = np.random.default_rng(0).normal(size=(640, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
backup = keras.callbacks.BackupAndRestore("backup")  # in the run's workdir: the same for every start
model.fit(x, y, batch_size=32, epochs={EPOCHS}, verbose=0, callbacks=[backup, Paced()])
print("training done", flush=True)
"""


def test_a_training_longer_than_the_time_limit_is_requeued_until_done(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project, KERAS, "max_run_duration_seconds: 900\nstop_grace_seconds: 10\n", slurm="    time_limit: 1\n"
    )
    result = cli("run", "-f", str(path), timeout=900)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    (job,) = submitted(out)  # one job, however often it started
    restarts = [int(number) for number in re.findall(rf"slurm job {job} requeued \(time limit\) — restart (\d+)", out)]
    assert len(restarts) >= 2 and restarts == list(range(1, len(restarts) + 1)), out[-4000:]
    log = (home / "runs/demo-1/workdir/logs/0.log").read_text()
    starts = re.findall(rf"^start (\d+) of job {job}$", log, re.M)
    assert starts == [str(number) for number in range(len(restarts) + 1)], log[-3000:]
    finished = re.findall(r"^epoch (\d+) finished$", log, re.M)
    assert finished == [str(epoch) for epoch in range(1, EPOCHS + 1)], log[-3000:]  # each once, in order
    assert log.count("leaving for the requeue") == len(restarts) and "training done" in log
    kept = (home / "runs/demo-1/workdir/logs/slurm.log").read_text()  # the batch script's, in the run's logs
    for restart in restarts:
        assert f"slurm job {job}: time limit: the tasks stop, the job is requeued (restart {restart})" in kept, kept
    assert run_status(home, "demo-1") == "Completed"
    assert re.search(rf"JobState=COMPLETED .*Restarts={len(restarts)} ", show_job(job)), show_job(job)  # not in squeue


REFUSING_SCONTROL = """\
#!/bin/sh
# scontrol, but for `requeue`, which Slurm refuses (as a cluster with requeue disabled for users would)
if [ "$1" = requeue ]; then
  echo "slurm_requeue error: Requested operation is presently disabled" >&2
  exit 1
fi
exec {real} "$@"
"""


def test_a_requeue_slurm_refuses_fails_the_run_in_one_line(project, home, tmp_path: Path, slurm_cluster):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "scontrol"
    wrapper.write_text(REFUSING_SCONTROL.format(real=shutil.which("scontrol")))
    wrapper.chmod(0o755)
    path = slurm_manifest(
        project,
        "import time\nprint('training', flush=True)\ntime.sleep(300)\n",
        "max_run_duration_seconds: 600\nstop_grace_seconds: 5\n",
        slurm="    time_limit: 1\n",
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "COLUMNS": "300"}
    result = subprocess.run([TFTRAIN, "run", "-f", str(path)], capture_output=True, text=True, timeout=300, env=env)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in out, out[-3000:]
    (job,) = submitted(out)
    assert (
        f"Slurm refused to requeue job {job} at its time limit (scontrol requeue: slurm_requeue error: Requested"
        " operation is presently disabled); the job was canceled" in out
    ), out[-3000:]
    assert run_status(home, "demo-1") == "Failed"
    assert re.search(r"JobState=(FAILED|CANCELLED) .*Restarts=0 ", show_job(job)), show_job(job)  # not in squeue


def test_max_run_duration_ends_a_requeued_job(project, cli, home, slurm_cluster):
    """tftrain's own limit counts over every start of the job, its queue between them included: at it
    the job is canceled wherever it is (running, or pending after a requeue)."""
    path = slurm_manifest(
        project,
        "import time\nprint('training', flush=True)\ntime.sleep(300)\n",
        "max_run_duration_seconds: 80\nstop_grace_seconds: 5\n",
        slurm="    time_limit: 1\n",
    )
    result = cli("run", "-f", str(path), timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 11, out[-3000:]  # TimedOut
    (job,) = submitted(out)
    assert "max_run_duration_seconds (80s) reached; Slurm job" in out and "Traceback" not in out, out[-3000:]
    assert run_status(home, "demo-1") == "TimedOut"
    assert re.search(r"JobState=(CANCELLED|FAILED|COMPLETED) ", show_job(job)), show_job(job)  # not in squeue
