"""A multi-objective sweep's result: the Pareto front of its completed trials (none of them beaten
on every objective by another), and which of them is the sweep's best, whose model registers:
the front's first: best on the first objective (ties: the next objectives, then the earlier trial).
Plain functions over (trial number, values): the book, `tftrain sweeps show` and tests share them."""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[int, tuple[float, ...]]  # a trial's number and its objectives' values, in the manifest's order


def _scores(values: Sequence[float], goals: Sequence[str]) -> tuple[float, ...]:
    """Higher is better on every axis, whatever the goal."""
    return tuple(value if goal == "maximize" else -value for value, goal in zip(values, goals))


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """Scores `a` at least as good as `b` on every objective and better on one."""
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))


def pareto_front(points: Sequence[Point], goals: Sequence[str]) -> list[int]:
    """The numbers of the trials no other trial dominates, best on the first objective first.
    A point with a value that is no finite number (nan, inf) is left out: it cannot be compared.
    Points are taken in lexicographic order of their scores, so a point can only be dominated by
    one taken before it, and then by one already on the front: O(n × front), not O(n²)."""
    scored = [
        (_scores(values, goals), number)
        for number, values in points
        if len(values) == len(goals) and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
    ]
    scored.sort(key=lambda item: (tuple(-x for x in item[0]), item[1]))
    front: list[tuple[tuple[float, ...], int]] = []
    for scores, number in scored:
        if not any(dominates(kept, scores) for kept, _ in front):
            front.append((scores, number))
    return [number for _, number in front]


def points_of(trials: Sequence[dict], metrics: Sequence[str]) -> list[Point]:
    """(number, values) of the trials' rows (book.py's, or sweep.json's) that have every objective's value."""
    points = []
    for trial in trials:
        values = trial.get("values")
        if isinstance(values, dict) and isinstance(trial.get("number"), int):
            row = tuple(values.get(metric) for metric in metrics)
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in row):
                points.append((trial["number"], tuple(float(v) for v in row)))
    return points


def objective_metrics(document: dict) -> list[str]:
    """The objectives' metric names of a sweep's record (sweep.json): its objective is a mapping, or a
    list of them (multi-objective). ValueError when it is neither: the file is not a sweep's record."""
    objective = document.get("objective")
    listed = objective if isinstance(objective, list) else [objective]
    metrics = [item.get("primary_metric") if isinstance(item, dict) else None for item in listed]
    if not metrics or not all(isinstance(metric, str) and metric for metric in metrics):
        raise ValueError("its objective is neither {primary_metric: …} nor a list of them")
    return metrics


def shown(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def value_cells(trial: dict, metrics: Sequence[str]) -> list[str]:
    """A trial's objective values for the table: one cell, or one per objective of a multi-objective sweep."""
    values = trial.get("values")
    if len(metrics) > 1:
        return [shown(values.get(metric)) if isinstance(values, dict) else "" for metric in metrics]
    return [shown(trial.get("value"))]


def best_words(best: dict, metrics: Sequence[str]) -> str:
    """`m1=0.9 m2=12` of the best trial; of a multi-objective sweep, also why it is the one."""
    if len(metrics) == 1:
        return f"{metrics[0]}={best['value']:.6g}"
    values = best.get("values") if isinstance(best.get("values"), dict) else {}
    words = " ".join(f"{metric}={shown(values.get(metric))}" for metric in metrics)
    return f"{words} (on the Pareto front, the best on {metrics[0]})"


def front_markdown(document: dict, metrics: Sequence[str]) -> list[str]:
    """The summary's Pareto front section of a multi-objective sweep (none for one objective)."""
    front = document.get("pareto")
    if len(metrics) == 1 or not isinstance(front, list):
        return []
    by_number = {t.get("number"): t for t in document["trials"]}
    lines = [
        "",
        (
            f"Pareto front ({len(front)} trial{'s' if len(front) != 1 else ''}, none beaten on every objective by"
            " another):"
        ),
        "",
    ]
    lines += ["| trial | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
    for number in front:
        trial = by_number.get(number)
        if trial is not None:
            lines.append(f"| {number} | " + " | ".join(value_cells(trial, metrics)) + " |")
    return lines
