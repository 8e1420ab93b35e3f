"""The JSON Schema (draft 2020-12) of a spec, in the shape pydantic gives it: each spec a `$defs`
entry (title, docstring, properties, required, additionalProperties), `X | None` as anyOf with
null, a union keyed by a field as oneOf with its discriminator, one told apart by a function as
anyOf (as oneOf an integer would match both `integer` and `number`)."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from runner.spec.fields import MISSING, Discriminator, Rule, Tag, is_spec, rule_of, spec_fields

NONE_TYPE = type(None)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_schema(cls: type) -> dict[str, Any]:
    """The schema of `cls`, the specs it holds under `$defs`."""
    defs: dict[str, Any] = {}
    schema = _spec(cls, defs)
    if defs:
        schema["$defs"] = defs
    return schema


def _spec(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    properties = {}
    required = []
    for field in spec_fields(cls).values():
        prop = _typed(field.annotation, field.rule, defs)
        if _titled(field.annotation):
            prop["title"] = field.key.title().replace("_", " ")
        if field.description:
            prop["description"] = field.description
        if field.default is not MISSING:
            prop["default"] = _json(field.default)
        if field.required:
            required.append(field.key)
        properties[field.key] = prop
    schema: dict[str, Any] = {"type": "object", "title": cls.__name__, "properties": properties}
    if cls.__spec_config__.extra == "forbid":
        schema["additionalProperties"] = False
    if required:
        schema["required"] = required
    if cls.__spec_doc__:
        schema["description"] = inspect.cleandoc(cls.__spec_doc__)
    return schema


def _titled(annotation: Any) -> bool:
    """pydantic titles a field unless it is (an optional) reference to another spec."""
    members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return not any(is_spec(member) for member in members if member is not NONE_TYPE)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) is typing.Union or isinstance(annotation, types.UnionType)


def _typed(annotation: Any, rule: Rule, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *markers = typing.get_args(annotation)
        discriminator = next((marker for marker in markers if isinstance(marker, Discriminator)), None)
        if discriminator is not None:
            return {"anyOf": [_typed(_untagged(member), Rule(), defs) for member in typing.get_args(inner)]}
        rules = [found for found in map(rule_of, markers) if found is not None]
        key = next((found.discriminator for found in rules if found.discriminator), None)
        if key is not None:
            return _keyed(typing.get_args(inner), key, defs)
        schema = _typed(inner, rule, defs)
        for found in rules:
            schema.update(_constraints(found, schema))
        return schema
    if _is_union(annotation):
        members = typing.get_args(annotation)
        return {"anyOf": [_typed(member, rule if member is not NONE_TYPE else Rule(), defs) for member in members]}
    if is_spec(annotation):
        if annotation.__name__ not in defs:
            defs[annotation.__name__] = {}  # taken before its fields: a spec that holds itself ends
            defs[annotation.__name__] = _spec(annotation, defs)
        return {"$ref": f"#/$defs/{annotation.__name__}"}
    schema = _plain(annotation, defs)
    schema.update(_constraints(rule, schema))
    return schema


def _plain(annotation: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if annotation is None or annotation is NONE_TYPE:
        return {"type": "null"}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if origin is typing.Literal:
        values = list(typing.get_args(annotation))
        schema: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": values}
        kinds = {_SCALARS[type(value)] for value in values}
        if len(kinds) == 1:
            schema["type"] = kinds.pop()
        return schema
    if origin is list:
        return {"type": "array", "items": _typed(typing.get_args(annotation)[0], Rule(), defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _typed(typing.get_args(annotation)[1], Rule(), defs)}
    if annotation is dict:
        return {"type": "object"}
    raise TypeError(f"no JSON Schema for {annotation!r}")


def _untagged(member: Any) -> Any:
    """A union member without its Tag (Annotated[bool, Tag('bool')] is bool)."""
    if typing.get_origin(member) is typing.Annotated:
        inner, *markers = typing.get_args(member)
        if any(isinstance(marker, Tag) for marker in markers):
            return inner
    return member


def _keyed(members: tuple, key: str, defs: dict[str, Any]) -> dict[str, Any]:
    refs = [_typed(member, Rule(), defs) for member in members]
    mapping = {typing.get_args(spec_fields(member)[key].annotation)[0]: ref["$ref"] for member, ref in zip(members, refs)}
    return {"oneOf": refs, "discriminator": {"propertyName": key, "mapping": mapping}}


def _constraints(rule: Rule, schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    found: dict[str, Any] = {}
    if rule.pattern is not None:
        found["pattern"] = rule.pattern
    if rule.min_length is not None:
        found[{"array": "minItems", "object": "minProperties"}.get(kind, "minLength")] = rule.min_length
    for value, name in ((rule.ge, "minimum"), (rule.le, "maximum"), (rule.gt, "exclusiveMinimum")):
        if value is not None:
            found[name] = value
    return found


def _json(value: Any) -> Any:
    if is_spec(type(value)):
        return value.model_dump(mode="json", by_alias=True)
    return value
