"""A model as a function, inside the model's own environment: load it (TensorFlow or ONNX
Runtime), take inputs (a sample file, a request, or synthesised from the signature), check them
against the signature with one message naming the input, and predict.

Imported by the gate (runner.serving.model_check) and the model server, in an environment that has
numpy and TensorFlow or onnxruntime, never by tftrain's own CLI.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from runner.serving.signature import SERVING_DEFAULT, Located, ModelFormat, Signature, TensorSpec

JSON_DTYPES = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "string",
)


class InputError(ValueError):
    """Inputs that do not fit the signature; the message names the input."""


class LoadError(RuntimeError):
    """The model does not load, or has no serving signature."""


class NotAModel(LoadError):
    """Files the gate cannot identify as a model (an `.h5` of weights with no architecture beside
    it): registered with a warning under `gate: auto`, never a failed load."""


def numpy_dtype(dtype: str) -> Any:
    return object if dtype == "string" else np.dtype(dtype)


def conform(name: str, value: Any, spec: TensorSpec) -> np.ndarray:
    """`value` as an array of the spec's dtype and shape, or InputError naming the input."""
    try:
        array = (
            np.asarray(value, dtype=numpy_dtype(spec.dtype))
            if spec.dtype != "string"
            else np.asarray(value).astype(object)
        )
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"input {name!r}: values are not {spec.dtype}") from None
    if array.dtype == object and spec.dtype != "string":
        raise InputError(f"input {name!r}: values are not {spec.dtype} (ragged rows?)")
    if spec.shape is not None:
        if array.ndim != len(spec.shape) or any(
            want is not None and want != got for want, got in zip(spec.shape, array.shape)
        ):
            shape = "(" + ", ".join(map(str, array.shape)) + ("," if array.ndim == 1 else "") + ")"
            raise InputError(f"input {name!r}: shape {shape} does not match the signature's {spec.shape_text()}")
    return array


def conform_all(values: dict[str, Any], signature: Signature) -> dict[str, np.ndarray]:
    wanted = {spec.name: spec for spec in signature.inputs}
    unknown = sorted(values.keys() - wanted.keys())
    if unknown:
        raise InputError(
            f"input {unknown[0]!r} is not in signature {signature.name!r} (its inputs: {', '.join(sorted(wanted))})"
        )
    missing = sorted(wanted.keys() - values.keys())
    if missing:
        raise InputError(
            f"input {missing[0]!r} is missing (signature {signature.name!r} needs {', '.join(sorted(wanted))})"
        )
    return {name: conform(name, values[name], wanted[name]) for name in sorted(wanted)}


def from_instances(instances: Any, signature: Signature) -> dict[str, Any]:
    """TensorFlow Serving's row form: a list of rows, each a value (one input) or a {name: value}."""
    if not isinstance(instances, list) or not instances:
        raise InputError("instances must be a non-empty list of rows")
    names = [spec.name for spec in signature.inputs]
    if all(isinstance(row, dict) for row in instances):
        keys = set(instances[0])
        if any(set(row) != keys for row in instances):
            raise InputError("every row of instances must name the same inputs")
        return {name: [row[name] for row in instances] for name in keys}
    if len(names) != 1:
        raise InputError(
            f"signature {signature.name!r} has inputs {', '.join(names)}: each row must be a {{name: value}} mapping"
        )
    return {names[0]: instances}


def from_columns(inputs: Any, signature: Signature) -> dict[str, Any]:
    """TensorFlow Serving's columnar form: {name: batch} or, for one input, the batch itself."""
    if isinstance(inputs, dict):
        return inputs
    names = [spec.name for spec in signature.inputs]
    if len(names) != 1:
        raise InputError(
            f"signature {signature.name!r} has inputs {', '.join(names)}: inputs must be a {{name: value}} mapping"
        )
    return {names[0]: inputs}


def load_sample(path: Path, signature: Signature) -> dict[str, np.ndarray]:
    """`model.sample_input`: a .npy (a model with one input), a .npz (arrays named by input) or a
    JSON file in TensorFlow Serving's request form ({"instances": …} or {"inputs": …})."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            values = from_columns(np.load(path, allow_pickle=False), signature)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                values = {name: archive[name] for name in archive.files}
        elif suffix == ".json":
            values = request_values(json.loads(path.read_text(encoding="utf-8")), signature)
        else:
            raise InputError(f"{path.name}: a sample is a .npy, .npz or .json file")
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, InputError):
            raise InputError(f"{path.name}: {exc}") from None
        raise InputError(f"{path.name} cannot be read as {suffix or 'a sample'}: {exc}") from None
    try:
        return conform_all(values, signature)
    except InputError as exc:
        raise InputError(f"{path.name}: {exc}") from None


def request_values(body: Any, signature: Signature) -> dict[str, Any]:
    if not isinstance(body, dict):
        return from_instances(body, signature)
    if ("instances" in body) == ("inputs" in body):
        raise InputError('a request has either "instances" (rows) or "inputs" (columns)')
    return (
        from_instances(body["instances"], signature) if "instances" in body else from_columns(body["inputs"], signature)
    )


def synthesize(signature: Signature, rows: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    """An input made up from the signature: `rows` in the first unknown dimension, 1 in the others."""
    random = np.random.default_rng(seed)
    values = {}
    for spec in signature.inputs:
        if spec.shape is None:
            raise InputError(f"input {spec.name!r} has no known rank: give model.sample_input")
        shape = tuple((rows if index == 0 else 1) if size is None else size for index, size in enumerate(spec.shape))
        if spec.dtype == "string":
            values[spec.name] = np.full(shape, "tftrain", dtype=object)
        elif spec.dtype == "bool":
            values[spec.name] = random.integers(0, 2, shape).astype(bool)
        elif spec.dtype.startswith(("int", "uint")):
            values[spec.name] = random.integers(0, 2, shape).astype(spec.dtype)
        elif spec.dtype in JSON_DTYPES:
            values[spec.name] = random.random(shape).astype(spec.dtype)
        else:
            raise InputError(f"input {spec.name!r} is {spec.dtype}: give model.sample_input")
    return values


class TensorFlowModel:
    """A SavedModel, or a Keras file exported to one (the same signatures either way)."""

    runtime = "tensorflow"

    def __init__(self, located: Located) -> None:
        import tensorflow as tf

        self._tf = tf
        self._exported = None
        path = located.path
        label = located.path.name if located.relative == "." else located.relative
        if located.weights is not None:
            label = f"{label} + {located.weights.name}"
        if located.format is ModelFormat.KERAS and path.suffix == ".h5" and _weights_only(path):
            raise NotAModel(
                f"{label} holds weights only (no model config) and no Keras JSON (model.to_json()) is beside it: "
                "the gate cannot tell which model they belong to"
            )
        try:
            if located.format is not ModelFormat.SAVED_MODEL:
                model = _keras_model(located)
                self._exported = tempfile.TemporaryDirectory(prefix="tftrain-export-")
                path = Path(self._exported.name) / "saved_model"
                _export_saved_model(model, path)
            self.saved_model_dir = path
            self._loaded = tf.saved_model.load(str(path))
        except Exception as exc:  # any failure to load is the gate's verdict, named
            self.close()
            raise LoadError(f"{label} does not load: {type(exc).__name__}: {_first_line(exc)}") from None
        self.signatures = {name: self._signature(name, fn) for name, fn in self._loaded.signatures.items()}
        if not self.signatures:
            self.close()
            raise LoadError(
                f"{label} has no serving signature (export it with model.export() or tf.saved_model.save(...,"
                " signatures=...))"
            )

    def _signature(self, name: str, fn) -> Signature:
        _, kwargs = fn.structured_input_signature
        outputs = fn.structured_outputs
        if not isinstance(outputs, dict):
            outputs = {"output_0": outputs}
        return Signature(
            name,
            tuple(self._spec(key, spec) for key, spec in sorted(kwargs.items())),
            tuple(self._spec(key, spec) for key, spec in sorted(outputs.items())),
        )

    @staticmethod
    def _spec(name: str, spec) -> TensorSpec:
        shape = (
            None
            if spec.shape.rank is None
            else tuple(None if size is None else int(size) for size in spec.shape.as_list())
        )
        return TensorSpec(name, spec.dtype.name, shape)

    def default_signature(self) -> Signature:
        return self.signatures.get(SERVING_DEFAULT) or next(iter(self.signatures.values()))

    def predict(self, inputs: dict[str, np.ndarray], signature: str | None = None) -> dict[str, np.ndarray]:
        name = signature or self.default_signature().name
        fn = self._loaded.signatures[name]
        outputs = fn(**{key: self._tf.constant(value) for key, value in inputs.items()})
        return {key: np.asarray(value) for key, value in outputs.items()}

    def close(self) -> None:
        if self._exported is not None:
            self._exported.cleanup()


def _keras_model(located: Located) -> Any:
    """A Keras file loaded whole; a JSON + weights pair the way Azure's scoring scripts load it
    (`model_from_json`, then `load_weights`, which reads Keras 3's `.weights.h5` and the legacy
    HDF5 of Keras 2's `save_weights("model.h5")` alike)."""
    import keras

    if located.format is ModelFormat.KERAS:
        return keras.saving.load_model(str(located.path), compile=False)
    text = located.path.read_text(encoding="utf-8")
    model = _model_from_json(keras, text)
    model.load_weights(str(located.weights))
    return model


def _model_from_json(keras: Any, text: str) -> Any:
    """Keras 3 reads its own configs with model_from_json; a Keras 2 config (no "module" keys:
    tf.keras ≤ 2.15, tf-keras) only with the reader its own legacy `.h5` loader uses."""
    config = json.loads(text)
    if int(keras.__version__.split(".")[0]) >= 3 and isinstance(config, dict) and "module" not in config:
        try:
            from keras.src.legacy.saving import saving_options, saving_utils
            from keras.src.saving import serialization_lib
        except ImportError:  # a Keras that moved them: model_from_json says what it cannot read
            return keras.models.model_from_json(text)
        # the scopes Keras's own legacy loader uses: safe mode on (a Lambda's marshalled code is refused, never run)
        with saving_options.keras_option_scope(use_legacy_config=True), serialization_lib.SafeModeScope(True):
            return saving_utils.model_from_config(_as_keras2(config))
    return keras.models.model_from_json(text)


def _as_keras2(node: Any) -> Any:
    """A Keras 2 config without the "module"/"registered_name" keys tf.keras 2.13–2.15 added to
    each object: with them Keras 3 reads its layers as its own (and refuses a Dense's
    batch_input_shape); without them its legacy reader takes the whole model, as Keras 2 wrote it."""
    if isinstance(node, dict):
        own = "class_name" in node
        return {
            key: _as_keras2(value) for key, value in node.items() if not (own and key in ("module", "registered_name"))
        }
    if isinstance(node, list):
        return [_as_keras2(value) for value in node]
    return node


def _export_saved_model(model: Any, path: Path) -> None:
    """model.export(): Keras 3's takes `verbose`, tf.keras 2.13–2.15's does not."""
    import inspect

    if "verbose" in inspect.signature(model.export).parameters:
        model.export(str(path), verbose=False)
    else:
        model.export(str(path))


def _weights_only(path: Path) -> bool:
    """An HDF5 file with no model config: what `save_weights` writes (Keras 2's layer_names, Keras
    3's layers/vars). A file that is not HDF5 at all is left to the loader, which says so."""
    try:
        import h5py

        with h5py.File(path, "r") as handle:
            return "model_config" not in handle.attrs
    except Exception:  # noqa: BLE001 - h5py's errors vary by version; the loader names what is wrong
        return False


class OnnxModel:
    """model.onnx in ONNX Runtime (CPU)."""

    runtime = "onnx"

    def __init__(self, path: Path, signature_name: str = SERVING_DEFAULT) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise LoadError(f"{path.name} does not load in ONNX Runtime: {_first_line(exc)}") from None
        inputs = tuple(
            TensorSpec(arg.name, _onnx_dtype(arg.type), _onnx_shape(arg.shape)) for arg in self._session.get_inputs()
        )
        outputs = tuple(
            TensorSpec(arg.name, _onnx_dtype(arg.type), _onnx_shape(arg.shape)) for arg in self._session.get_outputs()
        )
        self.signatures = {signature_name: Signature(signature_name, inputs, outputs)}

    def default_signature(self) -> Signature:
        return next(iter(self.signatures.values()))

    def predict(self, inputs: dict[str, np.ndarray], signature: str | None = None) -> dict[str, np.ndarray]:
        names = [spec.name for spec in self.default_signature().outputs]
        return dict(zip(names, self._session.run(names, inputs)))

    def close(self) -> None:
        pass


def _onnx_dtype(text: str) -> str:
    # 'tensor(float)' → float32
    inner = text.removeprefix("tensor(").removesuffix(")")
    return {"float": "float32", "double": "float64", "float16": "float16"}.get(inner, inner)


def _onnx_shape(shape) -> tuple[int | None, ...]:
    return tuple(size if isinstance(size, int) else None for size in shape)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def outputs_as_json(outputs: dict[str, np.ndarray]) -> dict[str, Any]:
    return {name: _jsonable(value) for name, value in sorted(outputs.items())}


def _jsonable(value: np.ndarray) -> Any:
    if value.dtype == object or value.dtype.kind in "SU":
        return (
            [item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item) for item in value.ravel()]
            if value.ndim
            else str(value)
        )
    return value.tolist()


def max_abs_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """The largest |a - b| over the outputs both have (numbers only); inf where shapes differ."""
    worst = 0.0
    for name in a.keys() & b.keys():
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
            continue
        if x.shape != y.shape:
            return float("inf")
        if x.size:
            worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))))
    return worst
