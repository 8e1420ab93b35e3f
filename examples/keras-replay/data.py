"""The example's data: readings from a sensor in its own units (0–1,000), four classes.

Each class is a cluster of 8 readings far from the others, so any sensible model of it classifies
nearly every reading the same way: two trainings of the same code agree on well over 99 % of the
requests, which is what a replay checks. The draws use a FIXED seed of their own.
"""

from __future__ import annotations

import numpy as np

DATA_SEED = 20261128
CLASSES = 4
FEATURES = 8
SCALE = 1000.0  # the raw readings' range: what production sends
TRAIN_SIZE = 4_000


def _centres() -> np.ndarray:
    return np.random.default_rng([DATA_SEED, 0]).uniform(0.15, 0.85, size=(CLASSES, FEATURES)) * SCALE


def draw(size: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` raw readings (float32, (size, FEATURES)) and their classes; `stream` picks the draw."""
    rng = np.random.default_rng([DATA_SEED, stream])
    y = rng.integers(0, CLASSES, size=size)
    x = _centres()[y] + rng.normal(0.0, 0.04 * SCALE, size=(size, FEATURES))
    return x.astype("float32"), y.astype("int32")


def training_split() -> tuple[np.ndarray, np.ndarray]:
    return draw(TRAIN_SIZE, 1)


def production(size: int) -> np.ndarray:
    """Readings as production sends them (raw units), for send.py."""
    return draw(size, 2)[0]
