"""`runner.keras.MetricsCallback`: every epoch's logs become tftrain metrics.

Keras is imported only when the callback is first used (the script has imported it already).
"""

from __future__ import annotations

import os

from runner.api import log_metric


def _base():
    if os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True"):
        import tf_keras

        return tf_keras.callbacks.Callback
    import keras

    return keras.callbacks.Callback


def __getattr__(name: str):
    if name != "MetricsCallback":
        raise AttributeError(name)

    class MetricsCallback(_base()):
        """Logs each epoch's (and, with per_batch=True, each batch's) metrics to tftrain."""

        def __init__(self, per_batch: bool = False, prefix: str = "") -> None:
            super().__init__()
            self.per_batch = per_batch
            self.prefix = prefix
            self.batches = 0

        def on_epoch_end(self, epoch, logs=None):
            for key, value in (logs or {}).items():
                log_metric(self.prefix + key, float(value), step=epoch + 1)

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            if self.per_batch:
                for key, value in (logs or {}).items():
                    log_metric(f"{self.prefix}batch_{key}", float(value), step=self.batches)

    globals()["MetricsCallback"] = MetricsCallback
    return MetricsCallback
