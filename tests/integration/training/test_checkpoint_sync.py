"""A Keras training whose BackupAndRestore directory is synced to S3 (moto's server) every second:
tftrain killed mid-epoch (SIGKILL, mid-sync as it may be), a second run with
`resume_from: checkpoint:RUN_ID` starts from the synced epoch, and redoes only what was lost."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import boto3
import pytest
from conftest import TFTRAIN

pytestmark = pytest.mark.integration

STEPS = 20  # batches per epoch
EPOCHS = 8
SCRIPT = f"""\
import os, time
import numpy as np
import keras

class Steps(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        print("initial epoch", self.model._initial_epoch, flush=True)
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.1)
        print("step", self.epoch * {STEPS} + batch + 1, flush=True)
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

resume = os.environ.get("TFTRAIN_RESUME_FROM")
print("resume from", resume, sorted(os.listdir("outputs/checkpoints")) if os.path.isdir("outputs/checkpoints") else None, flush=True)
x = np.random.default_rng(0).normal(size=({STEPS} * 8, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
backup = keras.callbacks.BackupAndRestore("outputs/checkpoints", delete_checkpoint=False)
model.fit(x, y, batch_size=8, epochs={EPOCHS}, verbose=0, callbacks=[backup, Steps()])
print("done", flush=True)
"""


def manifest(bucket: str, endpoint: str, extra: str = "") -> str:
    return (
        f"checkpoints:\n  dir: outputs/checkpoints\n  sync_to: s3://{bucket}/team\n  every_seconds: 1\n  endpoint_url:"
        f" {endpoint}\nmodel: {{register: false}}\n" + extra
    )


def steps_in(log) -> list[int]:
    return [int(m) for m in re.findall(r"^step (\d+)$", log.read_text() if log.exists() else "", re.M)]


def test_a_killed_run_resumes_from_its_last_synced_checkpoint(project, home, s3_server, aws_env, tmp_path):
    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.create_bucket(Bucket="ckpt-resume")
    path = project(SCRIPT, manifest("ckpt-resume", s3_server))
    log = home / "runs/demo-1/workdir/logs/0.log"
    first = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not steps_in(log) or max(steps_in(log)) < 3 * STEPS + STEPS // 2:  # mid-epoch 4
        assert first.poll() is None and time.monotonic() < deadline, (
            first.stdout.read() if first.poll() is not None else "slow"
        )
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the machine is lost: tftrain, its sync and the training at once
    first.wait()
    done = max(steps_in(log))
    listed = json.loads(s3.get_object(Bucket="ckpt-resume", Key="team/demo-1/tftrain-checkpoints.json")["Body"].read())
    assert [item["kind"] for item in listed["checkpoints"]] == ["keras-backup"]
    state = listed["checkpoints"][0]["files"]["training_metadata.json"]["sha256"]
    synced = json.loads(s3.get_object(Bucket="ckpt-resume", Key=f"team/demo-1/blobs/{state}")["Body"].read())

    second = subprocess.run(
        [
            TFTRAIN,
            "run",
            "-f",
            str(project(SCRIPT, manifest("ckpt-resume", s3_server, "resume_from: checkpoint:demo-1\n"))),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    resumed = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    epoch = int(re.search(r"^initial epoch (\d+)$", resumed, re.M)[1])
    assert epoch == synced["epoch"], (
        synced,
        resumed[:2000],
    )  # from the last checkpoint synced (Keras names the epoch to run next)
    assert epoch >= 2, resumed[:2000]  # 2 s epochs: at most the epoch under way and a round of syncing are lost
    redone = done - epoch * STEPS
    print(
        f"killed at step {done}; resumed at epoch {epoch} (step {epoch * STEPS}): {redone} steps redone, {done} without"
        " the sync"
    )
    assert 0 <= redone <= 2 * STEPS
    assert steps_in(home / "runs/demo-2/workdir/logs/0.log")[0] == epoch * STEPS + 1
    assert "checkpoints: s3://ckpt-resume/team/demo-2 holds 1 complete, the latest checkpoints" in second.stdout


def test_a_missing_bucket_stops_the_run_before_the_training(project, home, cli, s3_server, aws_env):
    result = cli("run", "-f", str(project("print('trained')\n", manifest("no-such-bucket", s3_server))))
    assert result.returncode == 18, result.stdout + result.stderr
    assert (
        f"checkpoints.sync_to: S3: HeadBucket s3://no-such-bucket/team/demo-1 (endpoint {s3_server}) answered 404 Not"
        " Found" in result.stdout + result.stderr
    )
    assert "trained" not in result.stdout and not (home / "runs/demo-1/workdir/logs/0.log").exists()


def test_resuming_from_a_run_that_synced_nothing_is_one_line(project, home, cli, s3_server, aws_env):
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="ckpt-empty")
    assert cli("run", "-f", str(project("print('no checkpoint')\n", manifest("ckpt-empty", s3_server)))).returncode == 0
    result = cli(
        "run", "-f", str(project("print('x')\n", manifest("ckpt-empty", s3_server, "resume_from: checkpoint:demo-1\n")))
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "resume_from: run demo-1 has synced no complete checkpoint yet" in result.stdout + result.stderr


MANAGER = """\
import tensorflow as tf

step = tf.Variable(0, dtype=tf.int64)
manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), "outputs/checkpoints", max_to_keep=2)
print("restored", manager.restore_or_initialize(), "at step", int(step.numpy()), flush=True)
for _ in range(3):
    step.assign_add(10)
    manager.save()
"""


def test_a_checkpoint_manager_resumes_at_its_last_step(project, home, cli, s3_server, aws_env):
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="ckpt-manager")
    assert cli("run", "-f", str(project(MANAGER, manifest("ckpt-manager", s3_server)))).returncode == 0
    second = cli(
        "run", "-f", str(project(MANAGER, manifest("ckpt-manager", s3_server, "resume_from: checkpoint:demo-1\n")))
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    log = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    assert re.search(r"^restored .*ckpt-3 at step 30$", log, re.M), log[-2000:]
    assert sorted(p.name for p in (home / "runs/demo-2/resume").iterdir()) == [
        "checkpoint",
        "ckpt-3.data-00000-of-00001",
        "ckpt-3.index",
    ]
