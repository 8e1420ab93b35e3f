"""A fixed amount of CPU-bound Keras training (no randomness in the work done): bench/overhead.py."""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--samples", type=int, default=20000)
parser.add_argument(
    "--model-dir", help="export the trained model here as a SavedModel (bench/overhead.py: gated and registered)"
)
parser.add_argument(
    "--per-example", help="write each training example's correctness here, JSON Lines (bench/overhead.py --evaluation)"
)
args = parser.parse_args()

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.random((args.samples, 256), dtype=np.float32)
y = (x[:, :128].sum(axis=1) > x[:, 128:].sum(axis=1)).astype("int32")
model = keras.Sequential(
    [
        keras.Input((256,)),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(2),
    ]
)
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
model.fit(x, y, epochs=args.epochs, batch_size=128, verbose=2)
if args.model_dir:
    model.export(args.model_dir, verbose=False)
if args.per_example:
    import json

    correct = (np.argmax(model.predict(x, batch_size=1024, verbose=0), axis=1) == y).astype(int)
    with open(args.per_example, "w") as out:
        out.writelines(json.dumps({"id": i, "correct": int(c)}) + "\n" for i, c in enumerate(correct))
