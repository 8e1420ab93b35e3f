"""TensorFlow's tutorial "Parameter server training with ParameterServerStrategy" (tensorflow/docs,
site/en/tutorials/distribute/parameter_server_training.ipynb), its Model.fit path on a TF_CONFIG
cluster: the cells below are the tutorial's, unchanged, in its order. The tutorial itself starts an
in-process cluster (create_in_process_cluster, portpicker); its section "Clusters in the real world"
says what replaces that on real clusters, and that is the code above the first cell: one binary for
every task, branched on TF_CONFIG's task type, workers and parameter servers serving until stopped
(tftrain stops them when the chief, the coordinator, ends). NUM_PS is the cluster's. See NOTICE.md.
"""

import os

import tensorflow as tf

# "If you use the same binary for all tasks" (the tutorial's code for the worker and ps roles)
cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if cluster_resolver.task_type in ("worker", "ps"):
  # Set the environment variable to allow reporting worker and ps failure to the
  # coordinator. This is a workaround and won't be necessary in the future.
  os.environ["GRPC_FAIL_FAST"] = "use_caller"

  server = tf.distribute.Server(
      cluster_resolver.cluster_spec(),
      job_name=cluster_resolver.task_type,
      task_index=cluster_resolver.task_id,
      protocol=cluster_resolver.rpc_layer or "grpc",
      start=True)
  server.join()

# The coordinator (the chief): the tutorial's Model.fit cells
os.environ["GRPC_FAIL_FAST"] = "use_caller"
NUM_PS = len(cluster_resolver.cluster_spec().as_dict()["ps"])

# --- Instantiate a ParameterServerStrategy
variable_partitioner = (
    tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=(256 << 10),
        max_shards=NUM_PS))

strategy = tf.distribute.ParameterServerStrategy(
    cluster_resolver,
    variable_partitioner=variable_partitioner)

# --- Input data
global_batch_size = 64

x = tf.random.uniform((10, 10))
y = tf.random.uniform((10,))

dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10).repeat()
dataset = dataset.batch(global_batch_size)
dataset = dataset.prefetch(2)

# --- Model construction and compiling
with strategy.scope():
  model = tf.keras.models.Sequential([tf.keras.layers.Dense(10)])

  model.compile(tf.keras.optimizers.legacy.SGD(), loss="mse", steps_per_execution=10)

# --- Callbacks and training
working_dir = "/tmp/my_working_dir"
log_dir = os.path.join(working_dir, "log")
ckpt_filepath = os.path.join(working_dir, "ckpt")
backup_dir = os.path.join(working_dir, "backup")

callbacks = [
    tf.keras.callbacks.TensorBoard(log_dir=log_dir),
    tf.keras.callbacks.ModelCheckpoint(filepath=ckpt_filepath),
    tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir),
]

model.fit(dataset, epochs=5, steps_per_epoch=20, callbacks=callbacks)
