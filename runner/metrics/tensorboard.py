"""Scalars from TensorBoard event files under the run's logs directory."""

from __future__ import annotations

from pathlib import Path

from runner.metrics.point import MetricPoint

SCALARS = "scalars"


def read_event_scalars(logs_dir: Path, rank: int = 0) -> list[MetricPoint]:
    files = sorted(logs_dir.rglob("events.out.tfevents.*"))
    if not files:
        return []
    # Imported here: only runs that wrote event files pay for the tensorboard import.
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    points = []
    for path in files:
        prefix = path.parent.relative_to(logs_dir).as_posix()
        scalar_tags: set[str] = set()
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == SCALARS:
                    scalar_tags.add(value.tag)
                if value.tag not in scalar_tags or not value.HasField("tensor"):
                    continue
                array = tensor_util.make_ndarray(value.tensor)
                if array.size != 1:
                    continue
                name = value.tag if prefix == "." else f"{prefix}/{value.tag}"
                points.append(MetricPoint(name, float(array.reshape(())), event.step, event.wall_time, "tensorboard", rank))
    return points
