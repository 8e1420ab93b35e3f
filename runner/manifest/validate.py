"""Turn pydantic's validation errors (the manifest's, the pool inventory's) into one-line
messages that name the file, line and field, with "did you mean" for a misspelt key or value."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from runner.manifest.document import Location, YamlDocument, format_loc, one_line
from runner.manifest.fields import EXPRESSIONS, POLICIES, QUANTITY_PATTERN, SWEEP_ID_PATTERN

__all__ = ["allowed_keys", "format_loc", "validation_messages"]


def validation_messages(exc: Any, doc: YamlDocument, model: type) -> list[str]:
    messages = []
    seen = set()
    for error in exc.errors():
        loc = _data_loc(tuple(error["loc"]), doc.data)
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
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


_UNION_TAGS = {
    "mpi",
    "parameter_server",
    "multi_worker_mirrored",
    "bool",
    "int",
    "float",
    "str",
    "list",
    "none",
    "mapping",
    *EXPRESSIONS,
    *POLICIES,
}


def _describe(error: dict[str, Any], loc: Location, model: type, raw_loc: Location) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1], {part for part in raw_loc if isinstance(part, str)})
        key = str(loc[-1]) if loc else ""
        close = _close(key, allowed)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed keys: {', '.join(sorted(allowed))}"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind == "string_pattern_mismatch" and error["ctx"]["pattern"] == QUANTITY_PATTERN:
        return f"{error['input']!r} is not a Kubernetes quantity (e.g. 512Mi, 2Gi)"
    if kind == "string_pattern_mismatch" and error["ctx"]["pattern"] == SWEEP_ID_PATTERN:
        return f"{error['input']!r} is not a sweep id (NAME-sweep-N)"
    if kind == "union_tag_not_found":
        return f"required key is missing; one of {_quoted(_union_tags(model, loc[:-1]))}"
    if kind == "model_attributes_type":  # a tagged union's value that is no mapping
        field = _tag_field(model, loc)
        if field:
            return f"must be a mapping with {field}: one of {_quoted(_union_tags(model, loc))}"
    if kind == "union_tag_invalid":
        return f"{error['ctx']['tag']!r} is not one of {error['ctx']['expected_tags']}" + _did_you_mean(
            error["ctx"]["tag"], error["ctx"]["expected_tags"]
        )
    if kind in ("literal_error", "enum"):
        return f"{error.get('input')!r} is not one of {error['ctx']['expected']}" + _did_you_mean(
            error.get("input"), error["ctx"]["expected"]
        )
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return message


def _did_you_mean(value: Any, expected: str) -> str:
    """A close match among pydantic's quoted list of values ("'random', 'grid' or 'bayesian'")."""
    if not isinstance(value, str):
        return ""
    close = _close(value, re.findall(r"'([^']*)'", expected))
    return f"; did you mean {close[0]!r}?" if close else ""


def _quoted(values: list[str]) -> str:
    return ", ".join(repr(value) for value in values)


def _union_tags(model: type, loc: Location) -> list[str]:
    """The tags of the tagged union at `loc` (`type: choice`, `backend: mpi`, …), in declaration order."""
    return list(dict.fromkeys(tag for member in _models_at(model, loc) for tag in sorted(_tag_values(member))))


def _tag_field(model: type, loc: Location) -> str | None:
    """The key that tells the members of the tagged union at `loc` apart, if `loc` holds one."""
    members = _models_at(model, loc)
    shared = set.intersection(*(set(_tag_fields(member)) for member in members)) if len(members) > 1 else set()
    return min(shared) if len(shared) == 1 else None


def allowed_keys(model: type, loc: Location, tags: set[str] = frozenset()) -> list[str]:
    """Keys accepted at `loc` below `model` (used for 'did you mean'); of a tagged union's members,
    the one pydantic tried (its tag, e.g. `mpi`, is among `tags`), if it can be told."""
    models = _models_at(model, loc)
    tagged = [m for m in models if _tag_values(m) & tags]
    keys: set[str] = set()
    for member in tagged or models:
        keys.update(_fields(member))
    return sorted(keys)


def _models_at(model: type, loc: Location) -> list[type]:
    """The models a value at `loc` below `model` may be (several for a union)."""
    candidates: list[Any] = [model]
    for part in loc:
        nxt: list[Any] = []
        for candidate in candidates:
            for member in _members(candidate):
                if _is_model(member):
                    field = _fields(member).get(str(part))
                    if field is not None:
                        nxt.append(field.annotation)
                elif typing.get_origin(member) in (dict, list):
                    nxt.append(typing.get_args(member)[-1])
        candidates = nxt
    return [m for c in candidates for m in _members(c) if _is_model(m)]


def _tag_values(model: type) -> set[str]:
    """The values of a model's one-value Literal fields (a union member's tag, like backend: mpi)."""
    return set(_tag_fields(model).values())


def _tag_fields(model: type) -> dict[str, str]:
    """A model's one-value Literal fields and their values (`backend: mpi`)."""
    tags = {}
    for name, field in _fields(model).items():
        args = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
        if len(args) == 1 and isinstance(args[0], str):
            tags[name] = args[0]
    return tags


def _fields(model: type) -> dict:
    """Fields by the key written in YAML (the alias where there is one)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _members(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    """A pydantic model: a class with fields (the union members and containers are not)."""
    return isinstance(annotation, type) and hasattr(annotation, "model_fields")


def _close(word: str, choices: list[str]) -> list[str]:
    """The choice closest to a misspelt `word` ("did you mean"); difflib only loads on an error."""
    import difflib

    return difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
