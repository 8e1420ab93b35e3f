"""Last / best per metric, the primary metric, and a bounded sample of each series for curves.

Everything is folded in as points arrive: memory grows with the number of metric names (at most
MAX_METRICS of them are summarised), never with the number of points. Which point is "last" is
told by MetricsSummary (runner/history/record.py), and decided here only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from runner.history.record import MetricsSummary, MetricStats
from runner.telemetry.point import MetricPoint

if TYPE_CHECKING:  # a spec is handed in: `tftrain runs` reads summaries without the manifest's models
    from runner.manifest.model import MetricsSpec

DEFAULT_PRIMARY = ("val_accuracy", "accuracy", "val_loss", "loss")
MAX_METRICS = 1000
SAMPLES = 120  # per metric: twice what a summary's curve draws


class Samples:
    """At most SAMPLES points of one series with a step, spread evenly over those seen: every
    stride-th is kept, and when that is too many every other one goes and the stride doubles.
    The latest point is kept too, so that a curve ends where the series did."""

    __slots__ = ("kept", "latest", "seen", "stride")

    def __init__(self) -> None:
        self.stride, self.seen = 1, 0
        self.kept: list[MetricPoint] = []
        self.latest: MetricPoint | None = None

    def add(self, point: MetricPoint) -> None:
        if self.seen % self.stride == 0:
            self.kept.append(point)
            if len(self.kept) > SAMPLES:
                del self.kept[1::2]
                self.stride *= 2
        self.seen += 1
        self.latest = point

    def points(self) -> list[MetricPoint]:
        if self.latest is None or (self.kept and self.kept[-1] is self.latest):
            return list(self.kept)
        return [*self.kept, self.latest]


def _order(point: MetricPoint) -> tuple:
    """Where a point stands in its series, for "last" (see MetricsSummary): the step (a point
    without one before all that have one), then the time; equal ones go by arrival."""
    return (point.step is not None, point.step or 0, point.time)


class _Track:
    """One metric's state, whatever the order the sources' points arrive in (TensorBoard's at the end)."""

    __slots__ = ("best", "best_step", "count", "goal", "last", "last_order", "samples")

    def __init__(self, point: MetricPoint, goal: str) -> None:
        self.last, self.last_order = point.value, _order(point)
        self.best, self.best_step = point.value, point.step
        self.count, self.goal = 1, goal
        self.samples = Samples()
        if point.step is not None:
            self.samples.add(point)

    def add(self, point: MetricPoint) -> None:
        self.count += 1
        order = _order(point)
        if order >= self.last_order:  # equal: the later arrival wins
            self.last, self.last_order = point.value, order
        if _better(point.value, self.best, self.goal):
            self.best, self.best_step = point.value, point.step
        if point.step is not None:
            self.samples.add(point)

    def stats(self) -> MetricStats:
        return MetricStats(
            last=_json_number(self.last),
            best=_json_number(self.best),
            best_step=self.best_step,
            count=self.count,
            goal=self.goal,
        )


class SummaryBuilder:
    """Folds points in as they arrive."""

    def __init__(self, spec: MetricsSpec, max_metrics: int = MAX_METRICS) -> None:
        self.spec = spec
        self.max_metrics = max_metrics
        self.tracks: dict[str, _Track] = {}
        self.untracked = 0  # points of names past max_metrics: in metrics.jsonl, not summarised

    def add(self, points: Iterable[MetricPoint]) -> None:
        tracks = self.tracks
        for point in points:
            track = tracks.get(point.name)
            if track is not None:
                track.add(point)
            elif len(tracks) < self.max_metrics:
                tracks[point.name] = _Track(point, self.spec.goal_for(point.name))
            else:
                self.untracked += 1

    def samples(self) -> list[MetricPoint]:
        """The bounded sample of every series (points with a step), for curves."""
        return [point for track in self.tracks.values() for point in track.samples.points()]

    def primary(self) -> str | None:
        if self.spec.primary:
            return self.spec.primary
        return next((name for name in DEFAULT_PRIMARY if name in self.tracks), None)

    def summary(self) -> MetricsSummary:
        return MetricsSummary(
            primary=self.primary(), metrics={name: self.tracks[name].stats() for name in sorted(self.tracks)}
        )

    def as_dict(self) -> dict:
        return self.summary().as_dict()


def sampled(points: Iterable[MetricPoint], names: Iterable[str]) -> list[MetricPoint]:
    """The points of `names` that have a step, at most SAMPLES (+1) per name, in one pass:
    what a curve of a series of any length needs."""
    series = {name: Samples() for name in names}
    for point in points:
        samples = series.get(point.name)
        if samples is not None and point.step is not None:
            samples.add(point)
    return [point for samples in series.values() for point in samples.points()]


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
