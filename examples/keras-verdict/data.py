"""The example's data and its per-example file, shared by train.py and eval.py.

Ten classes in 16 dimensions, each class a mixture of three Gaussian clusters whose centres are
drawn once from a FIXED seed: every seed of every run, and every model eval.py is given, sees the
same training and evaluation examples, in the same order, with the same ids. Clusters of
different classes overlap, so some examples are hard and no model reaches 1.0. The draw uses its
own NumPy Generator: the global seeds tftrain sets (TFTRAIN_SEED) change training, never the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

DATA_SEED = 20240611  # the data, never TFTRAIN_SEED
NOISE_SEED = 7  # which training labels --label-noise flips
CLASSES = 10
CLUSTERS = 3  # per class: the boundary between classes is not linear
FEATURES = 16
SPREAD = 1.2  # the clusters' centres: N(0, SPREAD²) per coordinate; 1.2: the best possible accuracy is ~0.97
TRAIN_SIZE = 12_000
EVAL_SIZE = 5_000


@dataclass(frozen=True)
class Split:
    ids: list[str]
    x: np.ndarray  # float32 (n, FEATURES)
    y: np.ndarray  # int32 (n,)


def _centres() -> np.ndarray:
    rng = np.random.default_rng([DATA_SEED, 0])
    return rng.normal(0.0, SPREAD, size=(CLASSES, CLUSTERS, FEATURES))


def _draw(name: str, size: int, stream: int) -> Split:
    rng = np.random.default_rng([DATA_SEED, stream])
    y = rng.integers(0, CLASSES, size=size)
    cluster = rng.integers(0, CLUSTERS, size=size)
    x = _centres()[y, cluster] + rng.normal(0.0, 1.0, size=(size, FEATURES))
    ids = [f"{name}-{index:06d}" for index in range(size)]
    return Split(ids, x.astype("float32"), y.astype("int32"))


def training_split(label_noise: float = 0.0) -> Split:
    """The training examples; `label_noise` of them (a fraction) get a wrong label, always the same ones."""
    split = _draw("train", TRAIN_SIZE, 1)
    if label_noise <= 0:
        return split
    rng = np.random.default_rng([NOISE_SEED])
    flipped = rng.choice(TRAIN_SIZE, size=round(label_noise * TRAIN_SIZE), replace=False)
    y = split.y.copy()
    y[flipped] = (y[flipped] + rng.integers(1, CLASSES, size=len(flipped))) % CLASSES  # another class, at random
    return Split(split.ids, split.x, y)


def evaluation_split() -> Split:
    return _draw("eval", EVAL_SIZE, 2)


def write_per_example(model, split: Split, path: str) -> tuple[float, float]:
    """One JSON line per evaluation example: its id, correct (0/1), loss (its cross-entropy).
    Returns the accuracy and the mean loss."""
    probabilities = np.asarray(model.predict(split.x, batch_size=1024, verbose=0), dtype="float64")
    chosen = probabilities[np.arange(len(split.y)), split.y]
    losses = -np.log(np.clip(chosen, 1e-12, 1.0))
    correct = (np.argmax(probabilities, axis=1) == split.y).astype(int)
    with open(path, "w", encoding="utf-8") as out:
        for identifier, right, loss in zip(split.ids, correct.tolist(), losses.tolist()):
            out.write(json.dumps({"id": identifier, "correct": right, "loss": round(loss, 6)}) + "\n")
    return float(correct.mean()), float(losses.mean())
