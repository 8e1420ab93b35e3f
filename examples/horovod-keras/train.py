"""The classic Horovod Keras example, unchanged in style: hvd.init, DistributedOptimizer, the
broadcast callback, rank 0 writes the checkpoint. Synthetic data, so it runs offline."""

import argparse
import os

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--learning-rate", type=float, default=0.01)
args = parser.parse_args()

hvd.init()
print(f"horovod rank {hvd.rank()} of size {hvd.size()} (local rank {hvd.local_rank()})", flush=True)

rng = np.random.default_rng(hvd.rank())  # each rank its own shard of the data
x = rng.random((2048, 16)).astype("float32")
y = (x[:, :8].sum(axis=1) > x[:, 8:].sum(axis=1)).astype("int32")

model = tf.keras.Sequential(
    [
        tf.keras.layers.Input((16,)),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(2, activation="softmax"),
    ]
)
optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(args.learning_rate * hvd.size()))
model.compile(loss="sparse_categorical_crossentropy", optimizer=optimizer, metrics=["accuracy"])
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
model.fit(x, y, batch_size=64, epochs=args.epochs, callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)

if hvd.rank() == 0:
    os.makedirs("outputs/model", exist_ok=True)
    model.save("outputs/model/model.keras")
    print("rank 0 saved outputs/model/model.keras")
