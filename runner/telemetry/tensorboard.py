"""Scalars from TensorBoard event files under the run's logs directory.

Records are read with a small TFRecord framing reader and decoded with the tensorboard
package's `Event` protobuf: tensorboard's own file loader imports TensorFlow (seconds, and noise
on stderr), which tftrain itself must not need.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from runner.telemetry.point import MetricPoint

SCALARS = "scalars"
HEADER = struct.Struct("<QI")
DTYPES = {1: "<f", 2: "<d", 3: "<i", 9: "<q", 19: "<e", 10: "<?"}  # TensorFlow dtype → struct format
VALUE_FIELDS = {1: "float_val", 2: "double_val", 3: "int_val", 9: "int64_val", 10: "bool_val"}


BATCH = 10_000


def read_event_scalars(logs_dir: Path, rank: int = 0) -> list[MetricPoint]:
    return [point for batch in event_scalar_batches(logs_dir, rank) for point in batch]


def event_scalar_batches(logs_dir: Path, rank: int = 0, size: int = BATCH) -> Iterator[list[MetricPoint]]:
    """The scalars, a batch at a time: event files can hold millions."""
    batch: list[MetricPoint] = []
    for point in _event_scalars(logs_dir, rank):
        batch.append(point)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _event_scalars(logs_dir: Path, rank: int) -> Iterator[MetricPoint]:
    files = sorted(logs_dir.rglob("events.out.tfevents.*"))
    if not files:
        return
    from tensorboard.compat.proto.event_pb2 import Event

    for path in files:
        prefix = path.parent.relative_to(logs_dir).as_posix()
        scalar_tags: set[str] = set()
        for record in tfrecords(path):
            event = Event.FromString(record)
            for value in event.summary.value:
                number = _scalar(value, scalar_tags)
                if number is not None:
                    name = value.tag if prefix == "." else f"{prefix}/{value.tag}"
                    yield MetricPoint(name, number, event.step, event.wall_time, "tensorboard", rank)


def tfrecords(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file; a record cut short (file still being written) ends it."""
    with path.open("rb") as handle:
        while True:
            header = handle.read(HEADER.size)
            if len(header) < HEADER.size:
                return
            length, _crc = HEADER.unpack(header)
            data = handle.read(length)
            footer = handle.read(4)
            if len(data) < length or len(footer) < 4:
                return
            yield data


def _scalar(value, scalar_tags: set[str]) -> float | None:
    if value.HasField("simple_value"):  # TF1 summaries
        return float(value.simple_value)
    # TF2 summaries: the plugin name comes with the first value of a tag only
    if value.metadata.plugin_data.plugin_name == SCALARS:
        scalar_tags.add(value.tag)
    if value.tag not in scalar_tags or not value.HasField("tensor"):
        return None
    tensor = value.tensor
    if tensor.tensor_shape.dim and any(d.size != 1 for d in tensor.tensor_shape.dim):
        return None
    layout = DTYPES.get(tensor.dtype)
    if layout is None:
        return None
    if tensor.tensor_content:
        return float(struct.unpack_from(layout, tensor.tensor_content)[0])
    if tensor.dtype == 19:  # halves travel as the bits of a uint16
        return float(struct.unpack("<e", struct.pack("<H", tensor.half_val[0]))[0]) if tensor.half_val else None
    values = getattr(tensor, VALUE_FIELDS[tensor.dtype])
    return float(values[0]) if values else None
