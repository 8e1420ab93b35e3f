"""What the gate found, as data: serving.json (written by the check's process, runner.serving.model_check)
and export.json (the ONNX export's). Both come from a process that ran the user's model: each field
is checked for its type here, and a file that is not what the check writes is the gate's failure
(ModelGateError, naming the file and the field), never a KeyError. `as_json` gives back the
document the version records (version.json's "serving"), key for key as before."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import ModelGateError
from runner.serving.contained import printable


@dataclass(frozen=True, slots=True)
class Prediction:
    """One output of the sample's prediction."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class OnnxExport:
    """export.json: model.onnx, converted and compared with TensorFlow's outputs on the sample."""

    file: str
    opset: int
    max_abs_diff: float
    tensorflow: str  # the release tf2onnx converted with
    converter: str
    outputs_missing: tuple[str, ...]

    @classmethod
    def read(cls, path: Path) -> OnnxExport:
        fields = _Fields(path)
        return cls(
            file=fields.get("file", str),
            opset=fields.get("opset", int),
            max_abs_diff=fields.get("max_abs_diff", float),
            tensorflow=fields.get("tensorflow", str),
            converter=fields.get("converter", str),
            outputs_missing=tuple(fields.strings("outputs_missing")),
        )

    def as_json(self) -> dict:
        return {
            "converter": self.converter,
            "file": self.file,
            "max_abs_diff": self.max_abs_diff,
            "opset": self.opset,
            "outputs_missing": list(self.outputs_missing),
            "tensorflow": self.tensorflow,
        }


@dataclass(frozen=True, slots=True)
class ServingReport:
    """serving.json: the model's format and files, its signatures, the TensorFlow it loaded in, the
    sample's predictions; then where the check ran, the ONNX export (None: none made) and the
    scoring script the gate ran (None: none)."""

    format: str
    path: str  # the model's file or folder, relative to model.path
    weights: str | None  # a Keras JSON's weights file
    signatures: dict  # runner.serving.signature's JSON of every signature, as the check wrote it
    signature: str  # the one predicted with
    tensorflow: str
    sample: str  # where the sample came from
    predictions: dict[str, Prediction]
    load_seconds: float
    checked_in: str = ""  # where the check ran (the run's environment, or the gate's own)
    onnx: OnnxExport | None = None
    scoring: dict | None = None  # runner.serving.scoring.gate's record of the scoring script (None: none)

    @classmethod
    def read(cls, path: Path) -> ServingReport:
        fields = _Fields(path)
        predictions = fields.get("predictions", dict)
        return cls(
            format=fields.get("format", str),
            path=fields.get("path", str),
            weights=fields.get("weights", str, required=False),
            signatures=fields.get("signatures", dict),
            signature=fields.get("signature", str),
            tensorflow=fields.get("tensorflow", str),
            sample=fields.get("sample", str),
            predictions={name: _prediction(fields, name, value) for name, value in predictions.items()},
            load_seconds=fields.get("load_seconds", float),
        )

    def as_json(self) -> dict:
        """serving.json's document (keys sorted, as the check writes them), then checked_in and onnx."""
        document = {
            "format": self.format,
            "load_seconds": self.load_seconds,
            "path": self.path,
            "predictions": {name: {"dtype": p.dtype, "shape": list(p.shape)} for name, p in self.predictions.items()},
            "sample": self.sample,
            "signature": self.signature,
            "signatures": self.signatures,
            "tensorflow": self.tensorflow,
            **({"weights": self.weights} if self.weights is not None else {}),
        }
        document = {**document, "checked_in": self.checked_in, "onnx": self.onnx.as_json() if self.onnx else None}
        return {**document, "scoring": self.scoring} if self.scoring is not None else document


class _Fields:
    """A JSON object from `path`, read field by field: a missing field or one of another type is a
    ModelGateError naming the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.document = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            raise ModelGateError(
                f"the gate's {path.name} cannot be read: {str(exc)[:200] or type(exc).__name__}"
            ) from None
        if not isinstance(self.document, dict):
            raise ModelGateError(f"the gate's {path.name} is not a JSON object")

    def get(self, name: str, kind: type, required: bool = True) -> Any:
        value = self.document.get(name)
        if value is None and not required:
            return None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            self.refuse(name, f"is not {_KINDS[kind]}")
        return value

    def strings(self, name: str) -> list[str]:
        values = self.get(name, list)
        if not all(isinstance(value, str) for value in values):
            self.refuse(name, "is not a list of strings")
        return values

    def refuse(self, name: str, problem: str) -> None:
        raise ModelGateError(
            f"the gate's {self.path.name}: {name} {problem} (the check did not write this file as it does)"
        )


_KINDS = {str: "a string", int: "a whole number", float: "a number", dict: "a JSON object", list: "a list"}


def _prediction(fields: _Fields, name: str, value: Any) -> Prediction:
    shape = value.get("shape") if isinstance(value, dict) else None
    dtype = value.get("dtype") if isinstance(value, dict) else None
    if (
        not isinstance(shape, list)
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in shape)
        or not isinstance(dtype, str)
    ):
        fields.refuse(f"predictions.{printable(name)}", "is not {shape: [whole numbers], dtype: string}")
    return Prediction(tuple(shape), dtype)
