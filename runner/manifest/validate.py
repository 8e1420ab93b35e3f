"""Turn pydantic's errors into one-line messages that name the file, line and field."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from runner.manifest.yamlfile import Location, YamlDocument, format_loc, one_line

__all__ = ["allowed_keys", "format_loc", "validation_messages"]


def validation_messages(exc: ValidationError, doc: YamlDocument, model: type[BaseModel]) -> list[str]:
    messages = []
    seen = set()
    for error in exc.errors():
        loc = _data_loc(tuple(error["loc"]), doc.data)
        if error["type"] == "union_tag_invalid":
            loc = (*loc, error["ctx"]["discriminator"].strip("'"))
        message = _describe(error, loc, model, tuple(error["loc"]))
        line = one_line(f"{doc.where(loc)}: {format_loc(loc)}: {message}")
        if line not in seen:
            seen.add(line)
            messages.append(line)
    return messages


def _data_loc(loc: Location, data: Any) -> Location:
    """Drop the parts of pydantic's location (union member tags) that are not in the data."""
    kept: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            kept.append(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
            kept.append(part)
        elif not isinstance(node, (dict, list)):
            break
        elif isinstance(node, dict) and not _is_member_tag(part):
            kept.append(part)  # a missing key: name it
            break
    return tuple(kept)


def _is_member_tag(part: Any) -> bool:
    """pydantic names the union member it tried: a class name, a type like `list[...]`, or a tag."""
    return isinstance(part, str) and (not part[:1].islower() or "[" in part or part in _UNION_TAGS)


_UNION_TAGS = {"mpi", "parameter_server", "multi_worker_mirrored", "bool", "int", "float", "str", "list", "none"}


def _describe(error: dict[str, Any], loc: Location, model: type[BaseModel], raw_loc: Location) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1], {part for part in raw_loc if isinstance(part, str)})
        key = str(loc[-1]) if loc else ""
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed keys: {', '.join(sorted(allowed))}"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        return f"{error['ctx']['tag']!r} is not one of {error['ctx']['expected_tags']}"
    if kind in ("literal_error", "enum"):
        return f"{error.get('input')!r} is not one of {error['ctx']['expected']}"
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return message


def allowed_keys(model: type[BaseModel], loc: Location, tags: set[str] = frozenset()) -> list[str]:
    """Keys accepted at `loc` below `model` (used for 'did you mean'); of a tagged union's members,
    the one pydantic tried (its tag, e.g. `mpi`, is among `tags`), if it can be told."""
    candidates: list[Any] = [model]
    for part in loc:
        nxt: list[Any] = []
        for candidate in candidates:
            for member in _members(candidate):
                if isinstance(member, type) and issubclass(member, BaseModel):
                    field = _fields(member).get(str(part))
                    if field is not None:
                        nxt.append(field.annotation)
                elif typing.get_origin(member) in (dict, list):
                    nxt.append(typing.get_args(member)[-1])
        candidates = nxt
    models = [m for c in candidates for m in _members(c) if isinstance(m, type) and issubclass(m, BaseModel)]
    tagged = [m for m in models if _tag_values(m) & tags]
    keys: set[str] = set()
    for member in tagged or models:
        keys.update(_fields(member))
    return sorted(keys)


def _tag_values(model: type[BaseModel]) -> set[str]:
    """The values of a model's one-value Literal fields (a union member's tag, like backend: mpi)."""
    values = set()
    for field in model.model_fields.values():
        args = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
        if len(args) == 1 and isinstance(args[0], str):
            values.add(args[0])
    return values


def _fields(model: type[BaseModel]) -> dict:
    """Fields by the key written in YAML (the alias where there is one)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]
