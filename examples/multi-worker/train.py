"""MultiWorkerMirroredStrategy with a custom training loop, which works with Keras 3 and with
tf-keras (tftrain's default for this backend on TF >= 2.16, since Keras 3's fit does not run under
it, keras-team/keras#20585). Every worker runs this script; worker 0 is the chief and writes the model."""

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]
print(f"worker {task['index']} of {strategy.num_replicas_in_sync} replicas", flush=True)

rng = np.random.default_rng(task["index"])
features = rng.random((1024, 8)).astype("float32")
labels = (features.sum(axis=1) > 4).astype("float32")[:, None]
global_batch = 32 * strategy.num_replicas_in_sync
dataset = strategy.experimental_distribute_dataset(
    tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(global_batch)
)

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)]
    )
    optimizer = tf.keras.optimizers.SGD(0.1)


@tf.function
def train_step(iterator):
    def step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.keras.losses.binary_crossentropy(y, model(x, training=True), from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses = strategy.run(step, args=next(iterator))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)


iterator = iter(dataset)
for epoch in range(1, 4):
    total = sum(float(train_step(iterator)) for _ in range(20)) / 20
    print(f"epoch {epoch}: loss={total:.4f}", flush=True)

# Every worker saves (collective ops); only the chief's copy is kept, the others' removed at once.
chief = task["index"] == 0
with tempfile.TemporaryDirectory() as scratch:
    target = "outputs/model" if chief else scratch
    os.makedirs(target, exist_ok=True)
    model.save(os.path.join(target, "model.keras"))
print(f"worker {task['index']} saved to {'outputs/model' if chief else 'a temporary directory'}")
