"""The serving signature without TensorFlow: saved_model.pb's wire format, locating the model in
model.path, and what a caller notices between two versions."""

from __future__ import annotations

import pytest

from runner.serving.signature import (
    ModelFormat,
    Signature,
    TensorSpec,
    changes,
    locate,
    saved_model_signatures,
    signatures_from_json,
)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 as protobuf writes it (-1: ten bytes)
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _tensor(name: str, dtype: int, dims: list[int] | None) -> bytes:
    shape = _field(3, b"\x01") if dims is None else b"".join(_field(2, _field(1, size)) for size in dims)
    return _field(1, name.encode() + b":0") + _field(2, dtype) + _field(3, shape)


def _saved_model(tag: str = "serve") -> bytes:
    inputs = _field(1, _field(1, b"features") + _field(2, _tensor("serving_default_features", 1, [-1, 64])))
    ids = _field(1, _field(1, b"ids") + _field(2, _tensor("serving_default_ids", 9, None)))
    outputs = _field(2, _field(1, b"output_0") + _field(2, _tensor("StatefulPartitionedCall", 1, [-1, 10])))
    definition = inputs + ids + outputs + _field(3, b"tensorflow/serving/predict")
    signature = _field(5, _field(1, b"serving_default") + _field(2, definition))
    internal = _field(5, _field(1, b"__saved_model_init_op") + _field(2, b""))
    meta = _field(1, _field(4, tag.encode())) + signature + internal
    return _field(1, 1) + _field(2, meta)


def test_signatures_are_read_from_the_wire_format(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(_saved_model())
    found = saved_model_signatures(tmp_path)
    assert list(found) == ["serving_default"]
    signature = found["serving_default"]
    assert signature.inputs == (TensorSpec("features", "float32", (None, 64)), TensorSpec("ids", "int64", None))
    assert signature.outputs == (TensorSpec("output_0", "float32", (None, 10)),)


@pytest.mark.parametrize("data", [b"\xff\xff\xff", _saved_model()[:-7], b"not a protobuf at all"])
def test_a_damaged_file_is_a_value_error(tmp_path, data):
    (tmp_path / "saved_model.pb").write_bytes(data)
    with pytest.raises(ValueError, match="saved_model.pb"):
        saved_model_signatures(tmp_path)


def test_a_graph_without_the_serving_tag_is_named(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(_saved_model(tag="train"))
    with pytest.raises(ValueError, match="no meta graph tagged 'serve'"):
        saved_model_signatures(tmp_path)


def test_locate_finds_a_saved_model_a_keras_file_or_one_of_them_in_a_directory(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    assert locate(saved).format is ModelFormat.SAVED_MODEL and locate(saved).relative == "."
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "digits.keras").write_bytes(b"zip")
    (holder / "notes.txt").write_text("x")
    found = locate(holder)
    assert found.format is ModelFormat.KERAS and found.relative == "digits.keras"
    (holder / "other.h5").write_bytes(b"")
    assert locate(holder) is None  # two models: which one would be served is a guess
    assert locate(tmp_path / "missing") is None
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "ckpt.index").write_bytes(b"")
    assert locate(weights) is None


def test_a_linked_model_is_not_followed(tmp_path):
    real = tmp_path / "real.keras"
    real.write_bytes(b"zip")
    (tmp_path / "link.keras").symlink_to(real)
    assert locate(tmp_path / "link.keras") is None


def _signature(**inputs) -> dict[str, Signature]:
    return {
        "serving_default": Signature(
            "serving_default",
            tuple(TensorSpec(n, d, s) for n, (d, s) in inputs.items()),
            (TensorSpec("y", "float32", (None, 10)),),
        )
    }


def test_changes_name_what_breaks_a_caller_first():
    before = _signature(x=("float32", (None, 16)), mask=("int32", (None,)))
    after = _signature(x=("float32", (None, 32)), mask=("int64", (None,)), extra=("float32", (None, 2)))
    assert changes(before, after) == [
        "breaking: input `extra` added",
        "breaking: input `mask` dtype int32 → int64",
        "breaking: input `x` shape (None, 16) → (None, 32)",
    ]
    assert changes(before, before) == []
    assert changes(before, {}) == ["breaking: signature `serving_default` removed"]


def test_signatures_round_trip_through_json():
    signatures = _signature(x=("float32", (None, 16)), s=("string", None))
    as_json = {name: s.as_json() for name, s in signatures.items()}
    assert signatures_from_json(as_json) == signatures
