from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MetricPoint:
    name: str
    value: float
    step: int | None
    time: float
    source: str  # log | file | tensorboard
    rank: int = 0

    def to_json(self) -> str:
        data = {"name": self.name, "value": self.value, "step": self.step, "time": self.time, "source": self.source, "rank": self.rank}
        if not math.isfinite(self.value):
            data["value"] = str(self.value)  # JSON has no nan/inf
        return json.dumps(data, separators=(",", ":"))

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


def read_series(path: Path) -> list[MetricPoint]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as handle:
        return [MetricPoint.from_dict(json.loads(line)) for line in handle if line.strip()]
