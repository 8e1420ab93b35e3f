"""What a request may put into the model: its JSON read strictly, and every input checked against
the signature (names, dtype, shape, finite numbers) — one set of rules for TensorFlow Serving's
`:predict` and the Open Inference Protocol's `infer`, so both answer the same 400 for the same value.

Nothing is coerced: `null`, `"1"`, `true` are not float32; 1.5 is not an int32; 3.5e38 overflows
float32; NaN and Infinity are refused (JSON has no such numbers, and a model fed them answers
`null`); a name given twice is refused rather than one of its values dropped. The work is done in
slices, and the JSON parser calls back into Python for each number: run in a thread, a large body
hands the interpreter back to the event loop every few milliseconds (health checks stay fast).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from runner.serving.modelio import InputError, from_columns, from_instances, numpy_dtype
from runner.serving.signature import Signature, TensorSpec

MAX_DIMENSIONS = 32  # numpy's own limit for the operations below
MAX_DIMENSIONS_TEXT = f"lists nested more than {MAX_DIMENSIONS} deep"
SLICE = 1 << 16  # values checked per step: each step is a few milliseconds of the interpreter
V2_DTYPES = {
    "bool": "BOOL",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "string": "BYTES",
}
# the JSON types each signature dtype takes, exactly (bool is not an int here, an int is a float)
_FLOAT, _INT, _BOOL, _STR = (int, float), (int,), (bool,), (str,)


def _accepted(dtype: str) -> tuple[type, ...]:
    if dtype.startswith(("float", "bfloat")):
        return _FLOAT
    if dtype.startswith(("int", "uint")):
        return _INT
    return {"bool": _BOOL, "string": _STR}.get(dtype, ())


def _refuse_constant(text: str) -> Any:
    raise InputError(f"the body holds {text}, which is not a JSON number: send finite numbers")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object; a key given twice is refused (a parser keeps one of its values silently)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise InputError(f"the body gives {twice!r} twice")
    return result


def _number(text: str) -> float:  # a Python call per number: a parsing thread yields the GIL
    return float(text)


def _integer(text: str) -> int:
    return int(text)


_DECODER = json.JSONDecoder(
    parse_float=_number, parse_int=_integer, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
)


def loads(body: bytes | str) -> Any:
    """The body's JSON, strictly: InputError for text that is not JSON, NaN/Infinity, a repeated
    key, or nesting too deep for the parser."""
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        return _DECODER.decode(text)
    except InputError:
        raise
    except RecursionError:
        raise InputError("the body is not JSON this server reads: it is nested too deep") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, an integer of more than 4300 digits
        raise InputError("the body is not JSON: send a JSON object with Content-Type: application/json") from None


def v1_values(body: Any, signature: Signature) -> dict[str, np.ndarray]:
    """TensorFlow Serving's `instances` (rows) or `inputs` (columns), checked."""
    if not isinstance(body, dict):
        raise InputError('the body must be a JSON object with "instances" or "inputs"')
    if ("instances" in body) == ("inputs" in body):
        raise InputError('a request has either "instances" (rows) or "inputs" (columns)')
    values = (
        from_instances(body["instances"], signature) if "instances" in body else from_columns(body["inputs"], signature)
    )
    return check_all(values, signature)


def v2_values(body: Any, signature: Signature) -> dict[str, np.ndarray]:
    """The Open Inference Protocol's `inputs` (name, datatype, shape, data), checked."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise InputError('the body must be a JSON object with "inputs": a list of tensors')
    specs = {spec.name: spec for spec in signature.inputs}
    values: dict[str, np.ndarray] = {}
    for index, item in enumerate(body["inputs"]):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InputError(f"inputs[{index}] must be an object with a name")
        name = item["name"]
        if name in values:
            raise InputError(f"input {name!r} is given twice")
        spec = specs.get(name)
        if spec is None:
            raise _not_in(name, signature)
        _check_datatype(name, item.get("datatype"), spec)
        shape = _v2_shape(name, item.get("shape"))
        if "data" not in item:
            raise InputError(
                f"input {name!r}: data is missing (binary tensors need the Inference-Header-Content-Length header)"
            )
        array = typed_array(name, item["data"], spec)
        if array.size != int(np.prod(shape, dtype=object)):
            raise InputError(f"input {name!r}: {array.size} values cannot fill shape {shape}")
        values[name] = array.reshape(shape)
    return check_all(values, signature)


def check_all(values: dict[str, Any], signature: Signature) -> dict[str, np.ndarray]:
    """Every input of the signature, no other, each of its dtype and shape; InputError naming the first that is not."""
    wanted = {spec.name: spec for spec in signature.inputs}
    unknown = sorted(values.keys() - wanted.keys())
    if unknown:
        raise _not_in(unknown[0], signature)
    missing = sorted(wanted.keys() - values.keys())
    if missing:
        raise InputError(
            f"input {missing[0]!r} is missing (signature {signature.name!r} needs {', '.join(sorted(wanted))})"
        )
    return {
        name: check_shape(name, typed_array(name, values[name], wanted[name]), wanted[name]) for name in sorted(wanted)
    }


def _not_in(name: str, signature: Signature) -> InputError:
    names = ", ".join(sorted(spec.name for spec in signature.inputs))
    return InputError(f"input {name!r} is not in signature {signature.name!r} (its inputs: {names})")


def typed_array(name: str, value: Any, spec: TensorSpec) -> np.ndarray:
    """`value` (JSON lists, or an array already) as an array of the spec's dtype, with no value
    changed on the way: InputError naming the first value that is not of that dtype or does not fit it.
    Lists are taken a slice of rows at a time: no step holds the interpreter for long."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        if spec.dtype != "string" and value.dtype != np.dtype(spec.dtype):
            raise InputError(f"input {name!r}: the values are {value.dtype}, the signature takes {spec.dtype}")
        return _finite(name, value, value, spec)
    if not _accepted(spec.dtype):
        raise InputError(f"input {name!r} is {spec.dtype}: this server takes no JSON for it")
    rows = value if isinstance(value, list) and len(value) > 1 else [value]
    first = _objects(name, rows[0])
    step = max(1, SLICE // max(1, first.size))
    typed = np.empty((len(rows), *first.shape), dtype=numpy_dtype(spec.dtype))
    for start in range(0, len(rows), step):
        part = _objects(name, rows[start : start + step])
        if part.shape[1:] != first.shape:
            raise InputError(f"input {name!r}: rows of different lengths")
        typed[start : start + len(part)] = _converted(name, part, spec)
    return typed if rows is value else typed[0]


def check_shape(name: str, array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if spec.shape is not None:
        if array.ndim != len(spec.shape) or any(
            want is not None and want != got for want, got in zip(spec.shape, array.shape)
        ):
            shape = "(" + ", ".join(map(str, array.shape)) + ("," if array.ndim == 1 else "") + ")"
            raise InputError(f"input {name!r}: shape {shape} does not match the signature's {spec.shape_text()}")
    return array


def _objects(name: str, value: Any) -> np.ndarray:
    """Nested JSON lists as an object array of their leaves (rows of different lengths leave
    lists among the leaves: refused by the type check)."""
    try:
        objects = np.array(value, dtype=object)
    except (ValueError, RecursionError):  # more dimensions than numpy has
        raise InputError(f"input {name!r}: {MAX_DIMENSIONS_TEXT}") from None
    if objects.ndim > MAX_DIMENSIONS:
        raise InputError(f"input {name!r}: {MAX_DIMENSIONS_TEXT}")
    return objects


def _converted(name: str, objects: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """A slice of leaves in the spec's dtype, each of a JSON type that dtype takes, none changed."""
    accepted = _accepted(spec.dtype)
    odd = {type(item) for item in objects.flat} - set(accepted)
    if odd:
        example = next(item for item in objects.flat if type(item) in odd)
        raise InputError(f"input {name!r}: {_describe(example, spec.dtype)}")
    if spec.dtype == "string":
        return objects
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            typed = objects.astype(spec.dtype)
        except (OverflowError, ValueError):
            raise InputError(f"input {name!r}: a value is out of range for {spec.dtype}") from None
    return _finite(name, typed, objects, spec)


def _finite(name: str, typed: np.ndarray, original: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Floats must be finite numbers, after the cast too (3.5e38 is a float64 but not a float32)."""
    if typed.dtype.kind != "f":
        return typed
    bad = np.flatnonzero(~np.isfinite(typed))
    if bad.size:
        value = float(original.flat[int(bad[0])])
        if np.isfinite(value):
            raise InputError(f"input {name!r}: {value:g} overflows {spec.dtype}")
        raise InputError(f"input {name!r}: {value} is not a finite number")
    return typed


def _describe(value: Any, dtype: str) -> str:
    """Why `value` is not a `dtype`, in the client's terms (JSON's)."""
    if isinstance(value, list):
        return "rows of different lengths, or lists nested deeper than the signature"
    if value is None:
        shown = "null"
    elif isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, str):
        shown = f"the string {value[:20]!r}"
    elif isinstance(value, dict):
        shown = "an object"
    else:
        shown = repr(value)[:20]
    return f"{shown} is not {dtype}"


def _check_datatype(name: str, datatype: Any, spec: TensorSpec) -> None:
    wanted = V2_DTYPES.get(spec.dtype, spec.dtype.upper())
    if datatype != wanted:
        raise InputError(f"input {name!r}: datatype {datatype!r}, the signature takes {wanted}")


def _v2_shape(name: str, shape: Any) -> list[int]:
    """A v2 shape: sizes the data fills, each a whole number ≥ 0 (-1 means nothing in a request)."""
    if not isinstance(shape, list) or not all(type(size) is int and size >= 0 for size in shape):
        raise InputError(f"input {name!r}: shape must be a list of sizes ≥ 0, not {json.dumps(shape)[:60]}")
    return shape
