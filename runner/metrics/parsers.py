"""Metrics from log text: Keras progress/epoch lines and the manifest's regexes.

The pump hands over chunks of whole lines; the scans run over the chunk (C speed) and only the
lines that match are looked at in Python, so a script printing millions of lines stays cheap.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from runner.metrics.point import MetricPoint

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
# "Epoch 3/10" headers, and Keras progress lines "6/6 ━━━ 0s 23ms/step - accuracy: 0.55 - loss: 0.65"
# (Keras 3) or "6/6 [=====] - 0s 2ms/step - loss: 0.65 - accuracy: 0.55" (Keras 2 / tf.keras).
KERAS = re.compile(rb"^Epoch (?P<epoch>\d+)/\d+\s*$|^\s*(?P<done>\d+)/(?P<total>\d+)\b(?P<rest>.* - \w.*)$", re.M)
PAIR = re.compile(r"(?:^|\s)([A-Za-z_][\w./]*): ([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))(?=\s|$)")
NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf")

Emit = Callable[[list[MetricPoint]], None]


class LogMetricParser:
    """Parses one rank's stream; keeps the epoch it is in."""

    def __init__(self, regexes: Mapping[str, str], emit: Emit, rank: int = 0) -> None:
        self.patterns = {name: re.compile(pattern.encode(), re.M) for name, pattern in regexes.items()}
        self.emit = emit
        self.rank = rank
        self.epoch: int | None = None
        self.epoch_recorded = False
        self.counts: dict[str, int] = {}

    def feed(self, chunk: bytes) -> None:
        """`chunk` holds whole lines (ending in a newline)."""
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\x1b" in chunk:
            chunk = ANSI.sub(b"", chunk)
        events: list[tuple[int, str, MetricPoint | int]] = []
        for match in KERAS.finditer(chunk):
            events.append((match.start(), "keras", match))
        for name, pattern in self.patterns.items():
            events += [(start, "regex", (name, line)) for start, line in _matching_lines(pattern, chunk)]
        if not events:
            return
        events.sort(key=lambda event: event[0])
        now = time.time()
        points: list[MetricPoint] = []
        for _, kind, payload in events:
            if kind == "keras":
                points += self._keras(payload, now)
            else:
                points += self._regex(*payload, now)
        if points:
            self.emit(points)

    def _keras(self, match: re.Match, now: float) -> list[MetricPoint]:
        if match["epoch"]:
            self.epoch, self.epoch_recorded = int(match["epoch"]), False
            return []
        if match["done"] != match["total"] or (self.epoch is not None and self.epoch_recorded):
            return []  # a progress update, or an evaluate() line after this epoch's summary
        self.epoch_recorded = True
        rest = match["rest"].decode("utf-8", "replace")
        return [
            MetricPoint(name, float(value), self.epoch, now, "log", self.rank)
            for name, value in PAIR.findall(rest.replace(" - ", "  "))
        ]

    def _regex(self, name: str, line: bytes, now: float) -> list[MetricPoint]:
        pattern = self.patterns[name]
        match = pattern.search(line)
        if match is None:
            return []
        groups = match.groupdict()
        raw = groups.get("value") or match.group(1)
        if raw is None or not NUMBER.fullmatch(raw.decode("ascii", "replace").strip()):
            return []
        step = int(groups["step"]) if groups.get("step") and groups["step"].isdigit() else self._step(name)
        return [MetricPoint(name, float(raw), step, now, "log", self.rank)]

    def _step(self, name: str) -> int:
        if self.epoch is not None:
            return self.epoch
        count = self.counts.get(name, 0)
        self.counts[name] = count + 1
        return count


def _matching_lines(pattern: re.Pattern, chunk: bytes):
    """(start, line) for each line with a match, with the regex seeing one line at a time."""
    pos = 0
    while True:
        match = pattern.search(chunk, pos)
        if match is None:
            return
        start = chunk.rfind(b"\n", 0, match.start()) + 1
        end = chunk.find(b"\n", match.start())
        end = len(chunk) if end < 0 else end
        line = chunk[start:end]
        if pattern.search(line):
            yield start, line
        pos = end + 1
