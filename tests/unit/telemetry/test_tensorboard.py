from __future__ import annotations

import struct

import numpy as np
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from runner.telemetry.tensorboard import read_event_scalars


def write_events(path, events) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for event in events:
            data = event.SerializeToString()
            handle.write(struct.pack("<QI", len(data), 0) + data + b"\0\0\0\0")


def scalar_event(tag, value, step, first=False, content=False):
    tensor = TensorProto(dtype=1)
    if content:
        tensor.tensor_content = np.float32(value).tobytes()
    else:
        tensor.float_val.append(value)
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars")) if first else None
    summary_value = Summary.Value(tag=tag, tensor=tensor, metadata=metadata)
    return Event(step=step, wall_time=1000.0 + step, summary=Summary(value=[summary_value]))


def test_tf2_and_tf1_scalars(tmp_path):
    logs = tmp_path / "logs"
    write_events(
        logs / "train" / "events.out.tfevents.1.host",
        [
            Event(file_version="brain.Event:2"),
            scalar_event("epoch_loss", 0.5, 0, first=True),
            scalar_event("epoch_loss", 0.25, 1, content=True),
            Event(step=1, summary=Summary(value=[Summary.Value(tag="image", tensor=TensorProto(dtype=7))])),
        ],
    )
    write_events(
        logs / "events.out.tfevents.2.host",
        [Event(step=3, wall_time=5.0, summary=Summary(value=[Summary.Value(tag="acc", simple_value=0.75)]))],
    )
    points = read_event_scalars(logs)
    assert [(p.name, p.value, p.step, p.source) for p in points] == [
        ("acc", 0.75, 3, "tensorboard"),
        ("train/epoch_loss", 0.5, 0, "tensorboard"),
        ("train/epoch_loss", 0.25, 1, "tensorboard"),
    ]


def test_a_record_cut_short_ends_the_file(tmp_path):
    path = tmp_path / "events.out.tfevents.3.host"
    write_events(path, [scalar_event("loss", 1.0, 0, first=True), scalar_event("loss", 2.0, 1)])
    path.write_bytes(path.read_bytes()[:-10])
    assert [p.value for p in read_event_scalars(tmp_path)] == [1.0]


def test_every_scalar_dtype_decodes(tmp_path):
    def tensor_event(tag, tensor):
        metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        return Event(
            step=0, wall_time=1.0, summary=Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=metadata)])
        )

    write_events(
        tmp_path / "events.out.tfevents.4.host",
        [
            tensor_event("double", TensorProto(dtype=2, tensor_content=np.float64(0.125).tobytes())),
            tensor_event("int64", TensorProto(dtype=9, tensor_content=np.int64(-7).tobytes())),
            tensor_event("half", TensorProto(dtype=19, half_val=[int(np.float16(1.5).view(np.uint16))])),
            tensor_event("half_content", TensorProto(dtype=19, tensor_content=np.float16(0.25).tobytes())),
            tensor_event("int", TensorProto(dtype=3, int_val=[4])),
            tensor_event("flag", TensorProto(dtype=10, tensor_content=np.bool_(True).tobytes())),
        ],
    )
    values = {p.name: p.value for p in read_event_scalars(tmp_path)}
    assert values == {"double": 0.125, "int64": -7.0, "half": 1.5, "half_content": 0.25, "int": 4.0, "flag": 1.0}
