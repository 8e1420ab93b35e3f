"""What the model server says about a model and a bad request: the TF Serving metadata of an input or
output (its dtype and shape) and FastAPI's 422 as one line naming the input."""

from __future__ import annotations

import json
from typing import Any

# TensorFlow's DataType names (types.proto) where they are not DT_ + the upper-cased numpy name
TF_DTYPES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF"}


def tensor_info(spec) -> dict:
    dtype = TF_DTYPES.get(spec.dtype, f"DT_{spec.dtype.upper()}")
    if spec.shape is None:
        return {"dtype": dtype, "tensor_shape": {"dim": [], "unknown_rank": True}, "name": spec.name}
    dims = [{"size": str(-1 if size is None else size), "name": ""} for size in spec.shape]
    return {"dtype": dtype, "tensor_shape": {"dim": dims, "unknown_rank": False}, "name": spec.name}


def v2_shape(shape) -> list[int]:
    return [-1] if shape is None else [-1 if size is None else size for size in shape]


def validation_message(errors: list[dict], body: Any) -> str:
    """FastAPI's 422 (the v2 request does not parse) as one line naming the input where the
    error lies inside one: "input 'x': shape: Field required"."""
    if not errors:
        return "invalid request body"
    first = errors[0]
    message = str(first.get("msg", "invalid"))
    if first.get("type") == "json_invalid":
        return f"the body is not JSON: {message}"
    location = [part for part in first.get("loc", ()) if part != "body"]
    if location[:1] == ["InferenceRequest"]:  # pydantic names the model when the body is a union
        location = location[1:]
    if len(location) >= 2 and location[0] == "inputs" and isinstance(location[1], int):
        try:
            body = json.loads(body) if isinstance(body, (bytes, str)) else body
        except ValueError:
            body = None
        inputs = body.get("inputs") if isinstance(body, dict) else None
        item = inputs[location[1]] if isinstance(inputs, list) and location[1] < len(inputs) else None
        name = item.get("name") if isinstance(item, dict) else None
        where = ".".join(map(str, location[2:])) or "the input"
        return f"input {name!r}: {where}: {message}" if name else f"inputs[{location[1]}]: {where}: {message}"
    return f"invalid request body: {'.'.join(map(str, location)) or 'the body'}: {message}"
