"""Last / best per metric, and the primary metric."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from runner.manifest.model import MetricsSpec
from runner.metrics.point import MetricPoint

DEFAULT_PRIMARY = ("val_accuracy", "accuracy", "val_loss", "loss")


@dataclass(frozen=True)
class MetricSummary:
    name: str
    last: float
    best: float
    best_step: int | None
    count: int
    goal: str

    def as_dict(self) -> dict:
        return {
            "last": _json_number(self.last),
            "best": _json_number(self.best),
            "best_step": self.best_step,
            "count": self.count,
            "goal": self.goal,
        }


class SummaryBuilder:
    """Folds points in as they arrive: memory grows with the number of names, not points."""

    def __init__(self, spec: MetricsSpec) -> None:
        self.spec = spec
        self.table: dict[str, MetricSummary] = {}

    def add(self, points: Iterable[MetricPoint]) -> None:
        for point in points:
            self._add(point)

    def _add(self, point: MetricPoint) -> None:
        old = self.table.get(point.name)
        goal = self.spec.goal_for(point.name)
        if old is None:
            self.table[point.name] = MetricSummary(point.name, point.value, point.value, point.step, 1, goal)
            return
        better = _better(point.value, old.best, goal)
        self.table[point.name] = MetricSummary(
            point.name,
            point.value,
            point.value if better else old.best,
            point.step if better else old.best_step,
            old.count + 1,
            goal,
        )

    def primary(self) -> str | None:
        if self.spec.primary:
            return self.spec.primary
        return next((name for name in DEFAULT_PRIMARY if name in self.table), None)

    def as_dict(self) -> dict:
        return {
            "primary": self.primary(),
            "metrics": {name: summary.as_dict() for name, summary in sorted(self.table.items())},
        }


def _better(value: float, best: float, goal: str) -> bool:
    if math.isnan(value):
        return False
    if math.isnan(best):
        return True
    return value > best if goal == "maximize" else value < best


def _json_number(value: float):
    return value if math.isfinite(value) else str(value)


def primary_metric(summary: dict) -> tuple[str | None, object]:
    """(name, last value) of the primary metric of a metrics summary (metrics.json, a version's
    info["metrics"]); the value is None when there is none."""
    primary = summary.get("primary")
    return primary, (summary.get("metrics", {}).get(primary, {}).get("last") if primary else None)
