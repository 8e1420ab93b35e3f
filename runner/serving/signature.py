"""A model's serving signature, read without TensorFlow: where the model is in `model.path`, the
SavedModel's signature_defs (saved_model.pb read with a small protobuf wire reader), the shape of
the JSON kept with a version, and what changed between two versions ("breaking: input `x` shape
(None, 16) → (None, 32)").

Runs on tftrain's side (the PR comment, `serve`'s metadata) and inside the model's environment
(the gate): the standard library only.
"""

from __future__ import annotations

import enum
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

SERVING_DEFAULT = "serving_default"
SAVED_MODEL = "saved_model.pb"
KERAS_SUFFIXES = (".keras", ".h5")
WEIGHTS_SUFFIX = ".weights.h5"  # Keras 3's save_weights: weights only, never a model by itself
MAX_KERAS_JSON = 16 << 20  # a model.to_json() is kilobytes; a larger .json is not read as one
# tensorflow/core/framework/types.proto, DataType
DTYPES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    18: "complex128",
    19: "float16",
    22: "uint32",
    23: "uint64",
}


class ModelFormat(str, enum.Enum):
    SAVED_MODEL = "saved_model"
    KERAS = "keras"
    KERAS_JSON = "keras_json"  # model.to_json() + save_weights(): what Azure's Keras samples write and score


@dataclass(frozen=True)
class Located:
    """The loadable model inside `model.path`: a SavedModel directory, a Keras file, or a Keras
    JSON config (`path`) with its weights file beside it (`weights`)."""

    format: ModelFormat
    path: Path
    relative: str  # inside the registered model/ directory ('.' for the directory itself)
    weights: Path | None = None  # KERAS_JSON only


def locate(model_path: Path) -> Located | None:
    """A SavedModel directory, a `.keras`/`.h5` file, or a directory holding exactly one model at
    its top (a SavedModel directory, a Keras file, a Keras JSON + weights pair); None for anything
    else (checkpoints, pickles, …: not a model the gate knows). Links are never followed: what is
    registered holds no links, so the gate must not load through one."""
    if model_path.is_symlink():
        return None
    if model_path.is_file():  # a JSON alone is not a model: its weights would not be registered with it
        return Located(ModelFormat.KERAS, model_path, model_path.name) if is_keras_file(model_path) else None
    if not model_path.is_dir():
        return None
    if (model_path / SAVED_MODEL).is_file():
        return Located(ModelFormat.SAVED_MODEL, model_path, ".")
    found = candidates(model_path)
    return found[0] if len(found) == 1 else None


def candidates(directory: Path) -> list[Located]:
    """Every model at the top of `directory` (links left out), by name: a version directory's
    serving.json names which one was checked."""
    children = [child for child in sorted(directory.iterdir()) if not child.is_symlink()]
    files = [child for child in children if child.is_file()]
    pairs = _json_pairs(files)
    paired = {pair.weights for pair in pairs}
    found = [
        Located(ModelFormat.SAVED_MODEL, child, child.name)
        for child in children
        if child.is_dir() and (child / SAVED_MODEL).is_file()
    ]
    found += [
        Located(ModelFormat.KERAS, child, child.name) for child in files if is_keras_file(child) and child not in paired
    ]
    return sorted(found + pairs, key=lambda located: located.relative)


def is_keras_file(path: Path) -> bool:
    """A whole model saved by Keras (`.keras`, `.h5`); a `.weights.h5` holds weights only."""
    return path.suffix in KERAS_SUFFIXES and not path.name.endswith(WEIGHTS_SUFFIX)


def _json_pairs(files: list[Path]) -> list[Located]:
    """Keras JSON configs with their weights: `X.json` + `X.weights.h5` or `X.h5` (one of them), or
    the directory's only config with its only `.h5` file (model_architecture.json + weights.h5)."""
    weights = [path for path in files if path.suffix == ".h5"]
    if not weights:  # no JSON is read where nothing could pair with it
        return []
    configs = [path for path in files if path.suffix == ".json" and is_keras_json(path)]
    pairs = []
    for config in configs:
        named = [path for path in weights if path.name in (config.stem + WEIGHTS_SUFFIX, config.stem + ".h5")]
        if not named and len(configs) == 1 and len(weights) == 1:
            named = weights
        if len(named) == 1:
            pairs.append(Located(ModelFormat.KERAS_JSON, config, config.name, named[0]))
    return pairs


def is_keras_json(path: Path) -> bool:
    """A file holding a Keras model config as `model.to_json()` writes it ({"class_name": …,
    "config": {…}}), read only when small enough to be one."""
    import json

    try:
        if path.stat().st_size > MAX_KERAS_JSON:
            return False
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return (
        isinstance(config, dict)
        and isinstance(config.get("class_name"), str)
        and isinstance(config.get("config"), dict)
    )


@dataclass(frozen=True)
class TensorSpec:
    name: str  # the key callers use (a signature's input/output name)
    dtype: str
    shape: tuple[int | None, ...] | None  # None: unknown rank; None in it: any size

    def as_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}

    @classmethod
    def from_json(cls, data: dict) -> TensorSpec:
        shape = data.get("shape")
        return cls(str(data["name"]), str(data["dtype"]), None if shape is None else tuple(shape))

    def shape_text(self) -> str:
        if self.shape is None:
            return "(any rank)"
        return (
            "("
            + ", ".join("None" if size is None else str(size) for size in self.shape)
            + ("," if len(self.shape) == 1 else "")
            + ")"
        )


@dataclass(frozen=True)
class Signature:
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def as_json(self) -> dict:
        return {
            "inputs": [spec.as_json() for spec in self.inputs],
            "outputs": [spec.as_json() for spec in self.outputs],
        }

    @classmethod
    def from_json(cls, name: str, data: dict) -> Signature:
        return cls(
            name, tuple(map(TensorSpec.from_json, data["inputs"])), tuple(map(TensorSpec.from_json, data["outputs"]))
        )


def signatures_as_json(signatures: dict[str, Signature]) -> dict:
    return {name: signature.as_json() for name, signature in sorted(signatures.items())}


def signatures_from_json(data: dict) -> dict[str, Signature]:
    return {name: Signature.from_json(name, value) for name, value in data.items()}


# --- saved_model.pb, read without TensorFlow -------------------------------------------------


def saved_model_signatures(directory: Path, tag: str = "serve") -> dict[str, Signature]:
    """The signature_defs of the meta graph tagged `tag` (internal `__saved_model_init_op` and
    the like left out). ValueError for a file that is not a SavedModel."""
    data = (directory / SAVED_MODEL).read_bytes()
    try:
        for number, graph in _fields(data):
            if number != 2:  # SavedModel.meta_graphs
                continue
            tags, found = [], {}
            for key, value in _fields(graph):
                if key == 1:  # meta_info_def; its tags are field 4
                    tags += [item.decode() for field, item in _fields(value) if field == 4]
                elif key == 5:  # signature_def map entry
                    name, definition = _entry(value)
                    if name and not name.startswith("__"):
                        found[name] = _signature(name, definition or b"")
            if tag in tags:
                return found
    except (IndexError, UnicodeDecodeError, TypeError) as exc:
        raise ValueError(f"{directory / SAVED_MODEL} is not a SavedModel ({type(exc).__name__})") from None
    raise ValueError(f"{directory / SAVED_MODEL} has no meta graph tagged {tag!r}")


def _signature(name: str, data: bytes) -> Signature:
    inputs, outputs = [], []
    for key, value in _fields(data):
        if key in (1, 2):
            tensor, info = _entry(value)
            (inputs if key == 1 else outputs).append(_tensor(tensor or "", info or b""))
    return Signature(name, tuple(sorted(inputs, key=lambda t: t.name)), tuple(sorted(outputs, key=lambda t: t.name)))


def _tensor(name: str, data: bytes) -> TensorSpec:
    dtype, shape = "unknown", None
    for key, value in _fields(data):
        if key == 2:
            dtype = DTYPES.get(value, f"DT_{value}")
        elif key == 3:
            dims, unknown_rank = [], False
            for field, item in _fields(value):
                if field == 2:
                    size = next((x for f, x in _fields(item) if f == 1), 0)
                    size = size - (1 << 64) if size >= 1 << 63 else size  # int64 -1: any size
                    dims.append(None if size < 0 else size)
                elif field == 3 and item:
                    unknown_rank = True
            shape = None if unknown_rank else tuple(dims)
    return TensorSpec(name, dtype, shape)


def _entry(data: bytes) -> tuple[str | None, bytes | None]:
    key = value = None
    for field, item in _fields(data):
        if field == 1:
            key = item.decode()
        elif field == 2:
            value = item
    return key, value


def _varint(data: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, at


def _fields(data: bytes) -> Iterator[tuple[int, Any]]:
    at, end = 0, len(data)
    while at < end:
        key, at = _varint(data, at)
        wire = key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
            if at > end:
                raise IndexError("truncated")
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, at = data[at : at + width], at + width
        else:
            raise TypeError(f"wire type {wire}")
        yield key >> 3, value


def keras_version(path: Path) -> str | None:
    """The Keras version a `.keras` file was saved with (its metadata.json), if it says."""
    import json

    try:
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read("metadata.json")).get("keras_version")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


# --- what changed between two versions ------------------------------------------------------


def changes(before: dict[str, Signature], after: dict[str, Signature]) -> list[str]:
    """Lines naming what a caller of `before` would notice in `after`, breaking ones first."""
    breaking, other = [], []
    for name in sorted(before.keys() - after.keys()):
        breaking.append(f"breaking: signature `{name}` removed")
    for name in sorted(after.keys() - before.keys()):
        other.append(f"signature `{name}` added")
    for name in sorted(before.keys() & after.keys()):
        old, new = before[name], after[name]
        where = "" if name == SERVING_DEFAULT else f" (signature `{name}`)"
        for kind, olds, news in (("input", old.inputs, new.inputs), ("output", old.outputs, new.outputs)):
            olds_by, news_by = {t.name: t for t in olds}, {t.name: t for t in news}
            for tensor in sorted(olds_by.keys() - news_by.keys()):
                breaking.append(f"breaking: {kind} `{tensor}` removed{where}")
            for tensor in sorted(news_by.keys() - olds_by.keys()):
                (breaking if kind == "input" else other).append(
                    f"{'breaking: ' if kind == 'input' else ''}{kind} `{tensor}` added{where}"
                )
            for tensor in sorted(olds_by.keys() & news_by.keys()):
                a, b = olds_by[tensor], news_by[tensor]
                if a.shape != b.shape:
                    breaking.append(f"breaking: {kind} `{tensor}` shape {a.shape_text()} → {b.shape_text()}{where}")
                if a.dtype != b.dtype:
                    breaking.append(f"breaking: {kind} `{tensor}` dtype {a.dtype} → {b.dtype}{where}")
    return breaking + other
