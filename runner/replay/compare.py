"""Two answers to one request, compared: are they the same answer, and by how much do they differ.

An answer is read into named outputs (numpy arrays): TensorFlow Serving's `predictions` (rows; a
row of several outputs is a mapping) or `outputs` (columns: one value, or a mapping of them), the
Open Inference Protocol's `outputs` tensors (name, shape, data), and for /score any JSON, its
numbers leaf by leaf under one output named by their path. Answers are another party's (a server,
a scoring script): anything that cannot be read so is no answer, never an exception.

Two answers agree when every output has the same shape and either (a classifier: every output's
rows are vectors of ≥ 2 values) the same top class in every row, or every value within `tolerance`;
text and other non-numbers must be equal. Each output's largest and mean |Δ| are measured either way.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_VALUES = 1 << 22  # values one answer may hold for comparing (a 4-million-number answer): beyond, it is no answer


class Agreement(str, enum.Enum):
    TOP_CLASS = "top_class"  # classifiers: the argmax of each row
    VALUES = "values"  # every value within tolerance


@dataclass(frozen=True)
class Answer:
    """An answer's numeric outputs, and what is not numeric (compared by equality)."""

    outputs: dict[str, np.ndarray]
    other: tuple = ()  # (path, value) of strings, booleans, nulls: /score's answers may hold them


@dataclass(frozen=True)
class Difference:
    same: bool
    by: Agreement
    max_abs: dict[str, float]  # per output; inf where the shapes differ
    mean_abs: dict[str, float]

    @property
    def largest(self) -> float:
        return max(self.max_abs.values(), default=0.0)


def read_answer(body: Any) -> Answer | None:
    """An answer's outputs, or None when it holds no output tftrain can compare."""
    try:
        if isinstance(body, dict) and "predictions" in body:
            return Answer(_rows(body["predictions"]))
        if (
            isinstance(body, dict)
            and isinstance(body.get("outputs"), list)
            and all(isinstance(t, dict) and "data" in t for t in body["outputs"])
        ):
            return Answer({str(t.get("name", i)): _tensor(t) for i, t in enumerate(body["outputs"])})
        if isinstance(body, dict) and "outputs" in body:
            columns = body["outputs"]
            if isinstance(columns, dict):
                return Answer({str(name): _array(value) for name, value in columns.items()})
            return Answer({"output": _array(columns)})
        return _leaves(body)
    except (ValueError, TypeError, OverflowError, RecursionError):
        return None


def _array(value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind not in "biuf" or array.size > MAX_VALUES:
        raise ValueError("not a numeric tensor")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():  # NaN or an overflow: compared as the answer's bytes, never as numbers
        raise ValueError("not finite")
    return array


def _rows(predictions: Any) -> dict[str, np.ndarray]:
    if isinstance(predictions, list) and predictions and all(isinstance(row, dict) for row in predictions):
        names = sorted(predictions[0])
        if any(sorted(row) != names for row in predictions):
            raise ValueError("rows name different outputs")
        return {name: _array([row[name] for row in predictions]) for name in names}
    return {"predictions": _array(predictions)}


def _tensor(tensor: dict) -> np.ndarray:
    data, shape = _array(tensor["data"]), tensor.get("shape")
    if (
        isinstance(shape, list)
        and all(isinstance(size, int) and size >= 0 for size in shape)
        and math.prod(shape) == data.size
    ):
        return data.reshape(shape)
    return data


def _leaves(body: Any) -> Answer:
    """Any JSON: its numbers by path (one output, "score"), the rest kept for equality."""
    numbers, other, stack, seen = [], [], [("", body)], 0
    while stack:
        path, value = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValueError("too large an answer")
        if isinstance(value, bool) or value is None or isinstance(value, str):
            other.append((path, value))
        elif isinstance(value, (int, float)):
            numbers.append((path, float(value)))
        elif isinstance(value, dict):
            stack += [(f"{path}/{key}", item) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(f"{path}/{index}", item) for index, item in enumerate(value)]
        else:
            raise TypeError("not JSON")
    numbers.sort(key=lambda item: item[0])
    outputs = {"score": np.array([value for _, value in numbers], dtype=np.float64)} if numbers else {}
    return Answer(outputs, tuple(sorted(other, key=lambda item: item[0])) + (("paths", tuple(p for p, _ in numbers)),))


def is_classifier(answer: Answer) -> bool:
    """Every output's rows are vectors of ≥ 2 values (class scores)."""
    return bool(answer.outputs) and all(value.ndim >= 2 and value.shape[-1] >= 2 for value in answer.outputs.values())


def compare(candidate: Answer, baseline: Answer, tolerance: float, by: Agreement) -> Difference:
    """How `candidate` differs from `baseline`, judged `by` top class or by values."""
    max_abs, mean_abs, same = (
        {},
        {},
        candidate.other == baseline.other and candidate.outputs.keys() == baseline.outputs.keys(),
    )
    for name in sorted(candidate.outputs.keys() | baseline.outputs.keys()):
        mine, theirs = candidate.outputs.get(name), baseline.outputs.get(name)
        if mine is None or theirs is None or mine.shape != theirs.shape:
            max_abs[name], mean_abs[name], same = math.inf, math.inf, False
            continue
        delta = np.abs(mine - theirs)
        finite = bool(np.isfinite(delta).all()) if delta.size else True
        max_abs[name] = float(delta.max()) if delta.size and finite else (0.0 if not delta.size else math.inf)
        mean_abs[name] = float(delta.mean()) if delta.size and finite else (0.0 if not delta.size else math.inf)
        if by is Agreement.TOP_CLASS and mine.ndim >= 2 and mine.shape[-1] >= 2:
            same = same and bool((mine.argmax(axis=-1) == theirs.argmax(axis=-1)).all())
        else:
            same = same and max_abs[name] <= tolerance
    return Difference(same, by, max_abs, mean_abs)
