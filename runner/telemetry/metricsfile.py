"""Follows the JSON-lines file a script appends to ($TFTRAIN_METRICS_FILE).

What a script wrote there is its own text, secrets included: once the training is over, the
files are masked in place (their points are in the run's metrics.jsonl, masked, already).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.telemetry.masking import Masker
from runner.telemetry.point import MetricPoint

POLL_SECONDS = 0.25
NOTE_KEYS = {"image", "tag", "status"}


class MetricsFileFollower:
    def __init__(
        self,
        path: Path,
        emit: Callable[[list[MetricPoint]], None],
        warn: Callable[[str], None],
        rank: int = 0,
        note: Callable[[dict], None] | None = None,
    ):
        self.path = path
        self.emit = emit
        self.note = note  # records that are not points: {"image": …}, {"tag": …}, {"status": …}
        self.warn = warn
        self.rank = rank
        self.offset = 0
        self.line_no = 0
        self.partial = b""
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"metrics-file-{rank}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop following and read whatever the script wrote last."""
        self.stop_event.set()
        self.thread.join()
        self.poll()

    def _loop(self) -> None:
        while not self.stop_event.wait(POLL_SECONDS):
            self.poll()

    def poll(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        points = [point for line in lines if (point := self._parse(line))]
        if points:
            self.emit(points)

    def _parse(self, line: bytes) -> MetricPoint | None:
        self.line_no += 1
        if not line.strip():
            return None
        try:
            data = json.loads(line)
            if self.note is not None and isinstance(data, dict) and NOTE_KEYS & data.keys():
                self.note({**data, "rank": self.rank})
                return None
            return MetricPoint.from_dict(
                {**data, "time": data.get("time") or time.time(), "source": "file", "rank": self.rank}
            )
        except (ValueError, KeyError, TypeError) as exc:
            self.warn(f"{self.path}:{self.line_no}: ignored metrics line ({type(exc).__name__}: {exc})")
            return None


def mask_metrics_files(directory: Path, masker: Masker, warn: Callable[[str], None]) -> None:
    """Mask the secrets in every rank's metrics file (followed or not: all ranks write one)."""
    if not masker or not directory.is_dir():
        return
    for path in sorted(directory.glob("*.jsonl")):
        try:
            masker.mask_file(path)
        except OSError as exc:  # no room for the masked copy: the secrets go with the file
            path.unlink(missing_ok=True)
            warn(f"{path}: removed, its secrets could not be masked ({exc.strerror or exc})")
