"""One metrics series per run: appended live to metrics.jsonl, summarised, printed.

The series streams to disk in the order points arrive (sources interleave: TensorBoard's come at
the end); only the summary's incremental state stays in memory, and nothing is read back. Every
name, source, tag, image and verdict passes through the run's Masker before it is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.history.record import ImageNote, MetricsSummary
from runner.manifest.model import MetricsSpec
from runner.telemetry.logpump import write_failure
from runner.telemetry.masking import Masker
from runner.telemetry.point import MetricPoint
from runner.telemetry.summary import SummaryBuilder

PRINT_INTERVAL = 0.5


class MetricsRecorder:
    def __init__(
        self,
        path: Path,
        spec: MetricsSpec,
        show: Callable[[list[MetricPoint]], None],
        masker: Masker | None = None,
        warn: Callable[[str], None] | None = None,
        observe: Callable[[list[MetricPoint]], None] | None = None,
    ) -> None:
        """`observe`: given every point as it is recorded (a sweep reports the primary metric to its study)."""
        self.path = path
        self.observe = observe
        self.summary = SummaryBuilder(spec)
        self.show = show
        self.masker = masker if masker is not None else Masker()
        self.warn = warn
        self.lock = threading.Lock()
        self.handle = path.open("a", encoding="utf-8", buffering=1)
        self.unshown: dict[tuple[str, str], MetricPoint] = {}
        self.last_shown = 0.0
        self.images: list[ImageNote] = []
        self.tags: dict[str, str] = {}
        self.verdict: dict | None = None  # the script's own: {"status": "failed", "error": …}
        self.failure: str | None = None  # metrics.jsonl could not be written: "disk full writing PATH", …
        self.disk_full: Path | None = None
        self.failed_at: float | None = None  # when (time.monotonic()) `disk_full` failed: the run names the first file

    def note(self, record: dict) -> None:
        """A record that is no point: an image (path inside outputs), a tag, the script's verdict."""
        mask = self.masker.text
        with self.lock:
            if "image" in record:
                name, path = mask(str(record.get("name", ""))), mask(str(record["image"]))
                self.images.append(ImageNote(name=name, path=path, rank=int(record.get("rank", 0))))
            elif "tag" in record:
                self.tags[mask(str(record["tag"]))] = "" if record.get("value") is None else mask(str(record["value"]))
            elif record.get("status") == "failed" and self.verdict is None:
                self.verdict = {"status": "failed", "error": mask(str(record.get("error") or ""))}

    def metrics_summary(self) -> MetricsSummary:
        """The summary (last/best per metric, primary), with the images and tags the script logged:
        what metrics.json holds, from what is in memory (metrics.jsonl is never read back)."""
        with self.lock:
            summary = self.summary.summary()
            summary.images = list(self.images)
            summary.tags = dict(sorted(self.tags.items()))
        return summary

    def as_dict(self) -> dict:
        return self.metrics_summary().as_dict()

    def record(self, points: list[MetricPoint]) -> None:
        if self.masker:
            points = [self._masked(point) for point in points]
        with self.lock:
            self._write("".join([point.to_json() + "\n" for point in points]))
            untracked = self.summary.untracked
            self.summary.add(points)
            if self.summary.untracked and not untracked and self.warn is not None:
                self.warn(f"more than {self.summary.max_metrics} metric names: the others are in {self.path} only")
            tracked = self.summary.tracks
            for point in points:
                if point.name in tracked:
                    self.unshown[(point.source, point.name)] = point
            now = time.monotonic()
            if now - self.last_shown >= PRINT_INTERVAL:
                self._show(now)
        if self.observe is not None:
            self.observe(points)

    def _masked(self, point: MetricPoint) -> MetricPoint:
        name, source = self.masker.text(point.name), self.masker.text(point.source)
        if name is point.name and source is point.source:
            return point
        return point._replace(name=name, source=source)

    def _write(self, lines: str) -> None:
        if self.handle is None:
            return
        try:
            self.handle.write(lines)
        except OSError as exc:  # the summary goes on; the run ends Failed saying why
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if self.failure is None:
            self.failure, disk_full = write_failure(self.path, exc)
            self.disk_full = self.path if disk_full else None
            self.failed_at = time.monotonic()
            if self.warn is not None:
                self.warn(f"{self.failure}; the metrics summary goes on without it")
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass

    def _show(self, now: float) -> None:
        if self.unshown:
            self.show(list(self.unshown.values()))
            self.unshown.clear()
        self.last_shown = now

    def close(self) -> list[MetricPoint]:
        """Print what was held back, and return the bounded sample of each series (at most a
        few hundred points per metric, with a step), for the summary's curves."""
        with self.lock:
            self._show(time.monotonic())
            if self.handle is not None:
                try:
                    self.handle.close()
                except OSError as exc:
                    self._failed(exc)
                self.handle = None
            return self.summary.samples()
