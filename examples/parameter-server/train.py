"""TF2 ParameterServerStrategy with a ClusterCoordinator. Every task runs this script: workers
and parameter servers serve (and are stopped by tftrain when the chief is done); the chief
creates the variables on the parameter servers and schedules training steps on the workers."""

import argparse
import json
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args()

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task = json.loads(os.environ["TF_CONFIG"])["task"]
print(
    f"task {task['type']}:{task['index']} in cluster {json.dumps(resolver.cluster_spec().as_dict(), sort_keys=True)}",
    flush=True,
)

if resolver.task_type in ("worker", "ps"):
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, protocol="grpc", start=True
    )
    server.join()

strategy = tf.distribute.ParameterServerStrategy(resolver)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
workers = resolver.cluster_spec().num_tasks("worker")
print(f"chief: coordinating {workers} workers", flush=True)

rng = np.random.default_rng(0)
features = rng.random((1024, 8)).astype("float32")
labels = (features @ np.arange(1, 9, dtype="float32") > 18).astype("float32")[:, None]

with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)]
    )
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_metric = tf.keras.metrics.Mean()


def dataset_fn():
    return tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(1024).repeat().batch(32)


@tf.function
def step(iterator):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.binary_crossentropy(y, model(x, training=True), from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        loss_metric.update_state(loss)

    x, y = next(iterator)
    strategy.run(replica_step, args=(x, y))


iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
for epoch in range(1, 4):
    loss_metric.reset_state()
    for _ in range(args.steps):
        coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    print(f"epoch {epoch}: loss={loss_metric.result().numpy():.4f}", flush=True)

os.makedirs("outputs/model", exist_ok=True)
model.save("outputs/model/model.keras")
print("chief saved outputs/model/model.keras")
