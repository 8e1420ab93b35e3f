"""The smoke test a curated TensorFlow set must pass: run as a file by an environment's own Python.

A tf.keras fit with metrics and the TensorBoard callback, tf.summary.scalar (TensorFlow 2.21 no
longer installs tensorboard, and this is where that shows), a SavedModel export, and a reload that
predicts what the model predicts. Standard library, numpy and TensorFlow only: it imports nothing
from tftrain. Prints one JSON line (`smoke: {...}`) and exits 0, or raises.

    python smoke.py WORKDIR
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(workdir: Path) -> dict:
    started = time.monotonic()
    import numpy as np
    import tensorflow as tf

    keras = tf.keras
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("int32")
    model = keras.Sequential(
        [keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"]
    )
    logs = workdir / "logs"
    history = model.fit(
        x,
        y,
        epochs=2,
        batch_size=32,
        validation_split=0.25,
        verbose=0,
        callbacks=[keras.callbacks.TensorBoard(log_dir=str(logs))],
    )
    if "accuracy" not in history.history or "val_accuracy" not in history.history:
        raise AssertionError(f"fit reported no accuracy metric: {sorted(history.history)}")

    writer = tf.summary.create_file_writer(str(logs / "scalars"))
    with writer.as_default():
        if not tf.summary.scalar("smoke", 1.0, step=0):
            raise AssertionError("tf.summary.scalar wrote nothing")
    writer.flush()
    if not list((logs / "scalars").glob("events.out.tfevents.*")):
        raise AssertionError("tf.summary.scalar left no event file")

    exported = workdir / "savedmodel"
    if tuple(int(part) for part in tf.__version__.split(".")[:2]) >= (2, 13):
        model.export(str(exported))  # an inference-only SavedModel
    else:  # 2.12 on Python 3.11: model.export and model.save of a fitted model fail tracing the
        # optimizer's gradients ("Problematic op name: IdentityN") unless told not to save them
        tf.saved_model.save(
            model, str(exported), options=tf.saved_model.SaveOptions(experimental_custom_gradients=False)
        )
    reloaded = tf.saved_model.load(str(exported))
    serve = reloaded.signatures["serving_default"]
    (output,) = serve(tf.constant(x[:16])).values()
    difference = float(np.max(np.abs(output.numpy() - model.predict(x[:16], verbose=0))))
    if difference > 1e-5:
        raise AssertionError(f"the reloaded SavedModel predicts differently (max difference {difference})")
    return {
        "tensorflow": tf.__version__,
        "keras": _keras_version(keras),
        "numpy": np.__version__,
        "accuracy": round(float(history.history["accuracy"][-1]), 3),
        "summary": "ok",
        "savedmodel_max_difference": difference,
        "seconds": round(time.monotonic() - started, 1),
    }


def _keras_version(keras) -> str | None:
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        import tf_keras

        return f"tf-keras {tf_keras.__version__}"
    import keras as installed  # tf.keras of Keras 2 has no __version__; the package has

    return installed.__version__


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    target.mkdir(parents=True, exist_ok=True)
    print("smoke: " + json.dumps(main(target), sort_keys=True), flush=True)
