"""Metrics from log text: Keras progress/epoch lines and the manifest's regexes.

The pump hands over chunks of whole lines; the scans run over the chunk (C speed) and only the
lines that match are looked at in Python, so a script printing millions of lines stays cheap.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from operator import itemgetter

from runner.telemetry.point import MetricPoint

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
# "Epoch 3/10" headers, and Keras progress lines "6/6 ━━━ 0s 23ms/step - accuracy: 0.55 - loss: 0.65"
# (Keras 3) or "6/6 [=====] - 0s 2ms/step - loss: 0.65 - accuracy: 0.55" (Keras 2 / tf.keras).
KERAS = re.compile(rb"^Epoch (?P<epoch>\d+)/\d+\s*$|^\s*(?P<done>\d+)/(?P<total>\d+)\b(?P<rest>.* - \w.*)$", re.M)
PAIR = re.compile(r"(?:^|\s)([A-Za-z_][\w./]*): ([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))(?=\s|$)")
NUMBER = re.compile(rb"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\s*")

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
        # (where, regex name or None for Keras, match), in the order of the lines
        events: list[tuple[int, str | None, re.Match]] = [(m.start(), None, m) for m in KERAS.finditer(chunk)]
        for name, pattern in self.patterns.items():
            events += [(start, name, match) for start, match in _matching_lines(pattern, chunk)]
        if not events:
            return
        events.sort(key=itemgetter(0))
        now = time.time()
        points: list[MetricPoint] = []
        for _, name, match in events:
            if name is None:
                points += self._keras(match, now)
            elif (point := self._regex(name, match, now)) is not None:
                points.append(point)
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

    def _regex(self, name: str, match: re.Match, now: float) -> MetricPoint | None:
        groups = match.groupdict() if self.patterns[name].groupindex else {}
        raw = groups.get("value") or match.group(1)
        number = NUMBER.fullmatch(raw) if raw is not None else None
        if number is None:
            return None
        step = int(groups["step"]) if groups.get("step") and groups["step"].isdigit() else self._step(name)
        return MetricPoint(name, float(number[1]), step, now, "log", self.rank)

    def _step(self, name: str) -> int:
        if self.epoch is not None:
            return self.epoch
        count = self.counts.get(name, 0)
        self.counts[name] = count + 1
        return count


def _matching_lines(pattern: re.Pattern, chunk: bytes):
    """(start, match) for each line with a match, with the regex seeing one line at a time."""
    pos = 0
    while True:
        match = pattern.search(chunk, pos)
        if match is None:
            return
        start = chunk.rfind(b"\n", 0, match.start()) + 1
        end = chunk.find(b"\n", match.start())
        end = len(chunk) if end < 0 else end
        line_match = pattern.search(chunk[start:end])
        if line_match is not None:
            yield start, line_match
        pos = end + 1
