"""A fixed amount of Keras image classification on synthetic in-memory data (bench/gpu.py): a small
ResNet-ish CNN on 32x32x3 random images, 10 classes. Prints, in this order:

    tftrain-gpu-bench first line python=<interpreter>   before TensorFlow is imported
    gpus: N                                             the GPUs TensorFlow sees
    images/s: X                                         --steps steps, timed after --warmup steps

--require-gpu: exit 3 with one line where TensorFlow sees no GPU (never a CPU figure for a GPU one).
"""

import argparse
import sys

print(f"tftrain-gpu-bench first line python={sys.executable}", flush=True)

import os  # noqa: E402
import time  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400, help="steps timed")
parser.add_argument("--warmup", type=int, default=20, help="steps first, untimed (tracing, autotuning)")
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--require-gpu", action="store_true")
args = parser.parse_args()

gpus = tf.config.list_physical_devices("GPU")
print(f"gpus: {len(gpus)}", flush=True)
if args.require_gpu and not gpus:
    print("TensorFlow sees no GPU in this environment", file=sys.stderr, flush=True)
    sys.exit(3)


def block(x, filters: int, stride: int):
    shortcut = x
    x = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
    return keras.layers.ReLU()(keras.layers.Add()([x, shortcut]))


keras.utils.set_random_seed(0)
inputs = keras.Input((32, 32, 3))
x = keras.layers.ReLU()(keras.layers.Conv2D(32, 3, padding="same")(inputs))
for filters, stride in ((32, 1), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1)):
    x = block(x, filters, stride)
outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
model = keras.Model(inputs, outputs)
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])

# eight distinct batches, repeated: what is measured is the model's steps, not an input pipeline
rng = np.random.default_rng(0)
images = rng.random((8 * args.batch, 32, 32, 3), dtype=np.float32)
labels = rng.integers(0, 10, 8 * args.batch).astype("int32")
data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(args.batch).cache().repeat().prefetch(2)

model.fit(data, steps_per_epoch=args.warmup, epochs=1, verbose=0, shuffle=False)
started = time.perf_counter()
history = model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0, shuffle=False)  # returns once the steps ran
took = time.perf_counter() - started
print(f"loss: {history.history['loss'][-1]:.4f}", flush=True)
print(f"images/s: {args.steps * args.batch / took:.1f}", flush=True)
