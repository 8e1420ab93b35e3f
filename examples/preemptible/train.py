"""Handwritten digits with Keras, written to survive preemption: every epoch is backed up under
outputs/checkpoints by keras.callbacks.BackupAndRestore, and a run that follows a preempted one
(tftrain's `retry:`) starts from the backup it is given in $TFTRAIN_RESUME_FROM.

The data is scikit-learn's bundled 8x8 digits: no download, so it runs offline.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import time

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402

BACKUP_DIR = "outputs/checkpoints"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="a pause per batch: a slower machine")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def restore_backup():
    """The previous attempt's backup, copied into this run's own outputs (the old run stays as it was)."""
    previous = os.environ.get("TFTRAIN_RESUME_FROM")
    if previous and os.path.isdir(previous):
        shutil.copytree(previous, BACKUP_DIR, dirs_exist_ok=True)
        print(f"resuming from the backup in {previous}", flush=True)


def log_metric(name, value, step):
    path = os.environ.get("TFTRAIN_METRICS_FILE")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"name": name, "value": float(value), "step": int(step)}) + "\n")


class Progress(keras.callbacks.Callback):
    """Prints the first step's time and logs each step's loss under its global step number, so
    that a resumed attempt's metrics continue where the backup left them."""

    def __init__(self, steps_per_epoch, step_seconds):
        super().__init__()
        self.steps_per_epoch, self.step_seconds = steps_per_epoch, step_seconds
        self.epoch, self.first = 0, True

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        print(f"epoch {epoch + 1} begins", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        step = self.epoch * self.steps_per_epoch + batch + 1
        if self.first:
            self.first = False
            print(f"first step {step} at {time.time():.3f} (pid {os.getpid()})", flush=True)
        log_metric("step_loss", (logs or {}).get("loss", 0.0), step)
        if self.step_seconds:
            time.sleep(self.step_seconds)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            log_metric(key, value, epoch + 1)


def main():
    args = parse_args()
    # SIGTERM (a cancel, a time limit, the machine going away): end this epoch's work at once; the
    # last complete epoch is already backed up, and the exit status tells tftrain what happened
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    keras.utils.set_random_seed(args.seed)
    digits = load_digits()
    x = (digits.images.reshape(len(digits.images), -1) / 16.0).astype("float32")
    y = digits.target.astype("int32")
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=args.seed, stratify=y)
    restore_backup()
    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    steps_per_epoch = -(-len(x_train) // args.batch_size)
    model.fit(
        x_train,
        y_train,
        epochs=args.epochs,
        batch_size=args.batch_size,
        callbacks=[
            keras.callbacks.BackupAndRestore(BACKUP_DIR, delete_checkpoint=False),
            Progress(steps_per_epoch, args.step_seconds),
        ],
        verbose=0,
    )
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"test loss: {loss:.4f}")
    print(f"test accuracy: {accuracy:.4f}")
    os.makedirs("outputs/model", exist_ok=True)
    model.save("outputs/model/digits.keras")


if __name__ == "__main__":
    main()
