from __future__ import annotations

import json
import math
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as _quote
from pathlib import Path
from typing import NamedTuple

TELEMETRY = "system/"  # the start of the usage sampler's metric names: measured, not scored


class MetricPoint(NamedTuple):
    """One value of one metric. A NamedTuple, not a data class: a run may record millions (made
    faster than a slotted dataclass's), and its class is built in 0.1 ms on tftrain's start path."""

    name: str
    value: float
    step: int | None
    time: float
    source: str  # log | file | tensorboard
    rank: int = 0

    def to_json(self) -> str:
        """What json.dumps(…, separators=(",", ":")) writes, several times faster (a run may log millions)."""
        value = float(self.value)
        number = repr(value) if math.isfinite(value) else f'"{value}"'  # JSON has no nan/inf
        step = "null" if self.step is None else int(self.step)
        return (
            f'{{"name":{_quote(self.name)},"value":{number},"step":{step},"time":{float(self.time)!r},'
            f'"source":{_quote(self.source)},"rank":{int(self.rank)}}}'
        )

    @classmethod
    def from_dict(cls, data: dict) -> MetricPoint:
        return cls(
            name=str(data["name"]),
            value=float(data["value"]),
            step=None if data.get("step") is None else int(data["step"]),
            time=float(data["time"]),
            source=str(data.get("source", "file")),
            rank=int(data.get("rank", 0)),
        )


def iter_series(path: Path) -> Iterator[MetricPoint]:
    """The points of a metrics.jsonl, one at a time (a series may hold millions)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield MetricPoint.from_dict(json.loads(line))


def read_series(path: Path) -> list[MetricPoint]:
    return list(iter_series(path))
