"""One metrics series per run: appended live to metrics.jsonl, summarised, printed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.manifest.model import MetricsSpec
from runner.metrics.point import MetricPoint, read_series
from runner.metrics.summary import SummaryBuilder

PRINT_INTERVAL = 0.5


class MetricsRecorder:
    def __init__(self, path: Path, spec: MetricsSpec, show: Callable[[list[MetricPoint]], None]) -> None:
        self.path = path
        self.summary = SummaryBuilder(spec)
        self.show = show
        self.lock = threading.Lock()
        self.handle = path.open("a", encoding="utf-8", buffering=1)
        self.unshown: dict[tuple[str, str], MetricPoint] = {}
        self.last_shown = 0.0
        self.images: list[dict] = []
        self.tags: dict[str, str] = {}
        self.verdict: dict | None = None  # the script's own: {"status": "failed", "error": …}

    def note(self, record: dict) -> None:
        """A record that is no point: an image (path inside outputs), a tag, the script's verdict."""
        with self.lock:
            if "image" in record:
                self.images.append({"name": str(record.get("name", "")), "path": str(record["image"]), "rank": record.get("rank", 0)})
            elif "tag" in record:
                self.tags[str(record["tag"])] = "" if record.get("value") is None else str(record["value"])
            elif record.get("status") == "failed" and self.verdict is None:
                self.verdict = {"status": "failed", "error": str(record.get("error") or "")}

    def as_dict(self) -> dict:
        """The summary (last/best per metric, primary), with the images and tags the script logged."""
        summary = self.summary.as_dict()
        if self.images:
            summary["images"] = list(self.images)
        if self.tags:
            summary["tags"] = dict(sorted(self.tags.items()))
        return summary

    def record(self, points: list[MetricPoint]) -> None:
        with self.lock:
            self.handle.write("".join(point.to_json() + "\n" for point in points))
            self.summary.add(points)
            for point in points:
                self.unshown[(point.source, point.name)] = point
            now = time.monotonic()
            if now - self.last_shown >= PRINT_INTERVAL:
                self._show(now)

    def _show(self, now: float) -> None:
        if self.unshown:
            self.show(list(self.unshown.values()))
            self.unshown.clear()
        self.last_shown = now

    def close(self) -> list[MetricPoint]:
        """Print what was held back, sort the series by time (sources arrive out of order), and
        return it."""
        with self.lock:
            self._show(time.monotonic())
            self.handle.close()
        points = sorted(read_series(self.path), key=lambda point: point.time)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(point.to_json() + "\n" for point in points), encoding="utf-8")
        tmp.replace(self.path)
        return points
