"""A Keras training that outlives one Slurm job, and `tftrain run` followed in the background: the
requeue and preemption tests' (tests/integration/targets/test_slurm_{requeue,preemption}.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from conftest import TFTRAIN
from slurming import submitted

EPOCHS = 30  # half a second each

KERAS = f"""\
import os, signal, sys, time
import numpy as np
import keras

stopping = []
signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))


class Paced(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.05)  # 10 batches: half a second an epoch
        if stopping:  # between two batches, never in the middle of the backup's save
            print(f"SIGTERM in epoch {{self.epoch + 1}}: leaving for the requeue", flush=True)
            os._exit(143)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {{epoch + 1}} finished", flush=True)


print(f"start {{os.environ.get('SLURM_RESTART_COUNT', '0')}} of job {{os.environ.get('SLURM_JOB_ID')}}", flush=True)
x = np.random.default_rng(0).normal(size=(320, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
backup = keras.callbacks.BackupAndRestore("backup")  # in the run's workdir: the same for every start
model.fit(x, y, batch_size=32, epochs={EPOCHS}, verbose=0, callbacks=[backup, Paced()])
print("training done", flush=True)
"""


class Running:
    """`tftrain run` in the background, its output in a file; every job it submitted canceled at the end."""

    def __init__(self, path: Path, out: Path, env: dict | None = None) -> None:
        self.out = out
        self.handle = out.open("w")
        self.process = subprocess.Popen(
            [TFTRAIN, "run", "-f", str(path)], stdout=self.handle, stderr=subprocess.STDOUT, text=True, env=env
        )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def job(self, timeout: float = 120) -> str:
        return self.until(lambda text: (submitted(text) or [None])[0], timeout, "no job submitted")

    def until(self, found, timeout: float, what: str, read=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found((read or self.text)())
            if value:
                return value
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"{what}:\n{self.text()[-3000:]}")

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.handle.close()
        for job in submitted(self.text()):
            subprocess.run(["scancel", job], capture_output=True, timeout=30)


def limit_signal(job: str, ran: int) -> None:
    """What Slurm sends at the time limit: USR1 to the batch shell only, once the job has run `ran`
    seconds (the batch script takes an earlier USR1 for preemption's, which Slurm requeues itself)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        used = subprocess.run(["squeue", "-h", "-j", job, "-o", "%M"], capture_output=True, text=True, timeout=30)
        minutes, _, seconds = used.stdout.strip().rpartition(":")
        if seconds.isdigit() and int(minutes or 0) * 60 + int(seconds) >= ran:
            break
        time.sleep(0.5)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, capture_output=True, timeout=30)


def logged(home: Path):
    path = home / "runs/demo-1/workdir/logs/0.log"
    return lambda: path.read_text(errors="replace") if path.exists() else ""
