"""Validate data against a type of the spec layer: pydantic's rules and error wording for what the
specs use (strict or lax scalars, Literal, enums, `X | None`, list, dict, nested specs, tagged
unions, Annotated constraints, validators), one error per wrong value."""

from __future__ import annotations

import enum
import math
import re
import types
import typing
from functools import lru_cache
from typing import Any

from runner.spec.fields import (
    Config,
    Discriminator,
    Rule,
    Tag,
    ValidationError,
    ValidationInfo,
    is_spec,
    rule_of,
    spec_fields,
    spec_validators,
)

INVALID = object()  # a value that failed; its errors are in the list
NONE_TYPE = type(None)
LAX = Config(strict=False, extra="allow", frozen=False)


def validate(annotation: Any, data: Any, config: Config = LAX, title: str | None = None) -> Any:
    """`data` as `annotation`, or ValidationError listing every wrong value."""
    errors: list[dict[str, Any]] = []
    value = check(annotation, data, (), errors, config)
    if errors:
        raise ValidationError(title or getattr(annotation, "__name__", str(annotation)), errors)
    return value


def error(errors: list, kind: str, loc: tuple, msg: str, value: Any, ctx: dict | None = None) -> object:
    entry = {"type": kind, "loc": loc, "msg": msg, "input": value}
    if ctx is not None:
        entry["ctx"] = ctx
    errors.append(entry)
    return INVALID


def check(annotation: Any, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _annotated(annotation, value, loc, errors, config)
    if is_spec(annotation):
        return check_spec(annotation, value, loc, errors)
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return _union(typing.get_args(annotation), value, loc, errors, config)
    if origin is typing.Literal:
        return _literal(typing.get_args(annotation), value, loc, errors)
    if origin is list:
        return _list(typing.get_args(annotation)[0], value, loc, errors, config)
    if origin is dict:
        return _dict(typing.get_args(annotation), value, loc, errors, config)
    if annotation is None or annotation is NONE_TYPE:
        return value if value is None else error(errors, "none_required", loc, "Input should be None", value)
    if annotation is dict:
        return value if isinstance(value, dict) else error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum(annotation, value, loc, errors, config)
    if annotation in SCALARS:
        return SCALARS[annotation](value, loc, errors, config)
    raise TypeError(f"the spec layer does not check {annotation!r}")


def check_spec(cls: type, value: Any, loc: tuple, errors: list) -> Any:
    """A mapping as a spec (or the spec itself, taken as it is), each field checked in order."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        return error(errors, "model_type", loc, f"Input should be a valid dictionary or instance of {cls.__name__}", value,
                     {"class_name": cls.__name__})
    config: Config = cls.__spec_config__
    validators = spec_validators(cls)
    for validator in validators:
        if not validator.names:
            value = validator(cls, value, ValidationInfo({}, None))
    fields = spec_fields(cls)
    checked: dict[str, Any] = {}
    count = len(errors)
    for name, field in fields.items():
        key = field.key if field.key in value else name if name in value else None
        if key is None:
            if field.required:
                error(errors, "missing", (*loc, field.key), "Field required", value)
            continue
        here = (*loc, key)
        before = len(errors)
        item = value[key]
        item = _validators(cls, validators, name, "before", item, here, errors, checked)
        if item is not INVALID:
            item = check(field.annotation, item, here, errors, config)
        if item is not INVALID and item is not None:
            item = constrain(field.rule, item, here, errors)
        if item is not INVALID:
            item = _validators(cls, validators, name, "after", item, here, errors, checked)
        if len(errors) == before:
            checked[name] = item
    known = {key for name, field in fields.items() for key in (name, field.key)}
    extra = {key: item for key, item in value.items() if key not in known}
    for key, item in extra.items():
        if not isinstance(key, str):
            error(errors, "invalid_key", (*loc, key), "Keys should be strings", key)
        elif config.extra == "forbid":
            error(errors, "extra_forbidden", (*loc, key), "Extra inputs are not permitted", item)
    if len(errors) > count:
        return INVALID
    made = cls(**checked)
    if extra:
        object.__setattr__(made, "__spec_extra__", extra)
    return made


def _validators(cls, validators, name, mode, value, loc, errors, checked) -> Any:
    for validator in validators:
        if name in validator.names and validator.mode == mode:
            try:
                value = validator(cls, value, ValidationInfo(checked, name))
            except ValueError as exc:
                return error(errors, "value_error", loc, f"Value error, {exc}", value, {"error": exc})
    return value


def _annotated(annotation: Any, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    inner, *markers = typing.get_args(annotation)
    discriminator = next((marker for marker in markers if isinstance(marker, Discriminator)), None)
    if discriminator is not None:
        return _called_union(inner, discriminator, value, loc, errors, config)
    rules = [rule for rule in map(rule_of, markers) if rule is not None]
    field_key = next((rule.discriminator for rule in rules if rule.discriminator), None)
    if field_key is not None:
        return _keyed_union(typing.get_args(inner), field_key, value, loc, errors)
    value = check(inner, value, loc, errors, config)
    for rule in rules:
        if value is not INVALID:
            value = constrain(rule, value, loc, errors)
    return value


def constrain(rule: Rule, value: Any, loc: tuple, errors: list) -> Any:
    """The constraints of `rule` on an already checked value, pydantic's order: the first one broken is the error."""
    if isinstance(value, str):
        if rule.min_length is not None and len(value) < rule.min_length:
            plural = "" if rule.min_length == 1 else "s"
            return error(errors, "string_too_short", loc, f"String should have at least {rule.min_length} character{plural}",
                         value, {"min_length": rule.min_length})
        if rule.pattern is not None and not _compiled(rule.pattern).search(value):
            return error(errors, "string_pattern_mismatch", loc, f"String should match pattern '{rule.pattern}'", value,
                         {"pattern": rule.pattern})
    elif isinstance(value, (list, dict)):
        if rule.min_length is not None and len(value) < rule.min_length:
            kind = "List" if isinstance(value, list) else "Dictionary"
            plural = "" if rule.min_length == 1 else "s"
            return error(errors, "too_short", loc,
                         f"{kind} should have at least {rule.min_length} item{plural} after validation, not {len(value)}",
                         value, {"field_type": kind, "min_length": rule.min_length, "actual_length": len(value)})
    elif isinstance(value, (int, float)):
        if not rule.allow_inf_nan and isinstance(value, float) and not math.isfinite(value):
            return error(errors, "finite_number", loc, "Input should be a finite number", value)
        for bound, kind, words, broken in (
            (rule.le, "less_than_equal", "less than or equal to", lambda v, b: not v <= b),
            (rule.ge, "greater_than_equal", "greater than or equal to", lambda v, b: not v >= b),
            (rule.gt, "greater_than", "greater than", lambda v, b: not v > b),
        ):
            if bound is not None and broken(value, bound):
                key = {"less_than_equal": "le", "greater_than_equal": "ge", "greater_than": "gt"}[kind]
                return error(errors, kind, loc, f"Input should be {words} {bound}", value, {key: bound})
    return value


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern:
    """pydantic's patterns are Rust's: `$` ends the text, where Python's also matches before a final newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _union(members: tuple, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    """`X | None` (None, else X, errors at the same place); other unions: the first member that takes the value."""
    if NONE_TYPE in members:
        if value is None:
            return None
        members = tuple(member for member in members if member is not NONE_TYPE)
        if len(members) == 1:
            return check(members[0], value, loc, errors, config)
    tried: dict[Any, list] = {}
    for member in sorted(members, key=lambda member: not _exact(member, value)):  # pydantic's smart mode: the exact type first
        tried[member] = []
        result = check(member, value, loc, tried[member], config)
        if result is not INVALID:
            return result
    for member in members:  # every member's errors, its name in their place (`last.float`)
        label = getattr(member, "__name__", str(member))
        errors.extend({**entry, "loc": (*loc, label, *entry["loc"][len(loc):])} for entry in tried[member])
    return INVALID


def _exact(member: Any, value: Any) -> bool:
    return isinstance(member, type) and type(value) is member


def _called_union(inner: Any, discriminator: Discriminator, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    members = {}
    for member in typing.get_args(inner):
        member_type, *markers = typing.get_args(member)
        members[next(marker.tag for marker in markers if isinstance(marker, Tag))] = member_type
    tag = discriminator.function(value)
    if tag not in members:
        return error(errors, discriminator.custom_error_type, loc, discriminator.custom_error_message, value)
    return check(members[tag], value, (*loc, tag), errors, config)


def _keyed_union(members: tuple, key: str, value: Any, loc: tuple, errors: list) -> Any:
    """A union of specs told apart by the value of one key (`backend: mpi`)."""
    by_tag = {typing.get_args(spec_fields(member)[key].annotation)[0]: member for member in members}
    for member in members:
        if isinstance(value, member):
            return value
    if not isinstance(value, dict):
        return error(errors, "model_attributes_type", loc, "Input should be a valid dictionary or object to extract fields from", value)
    if key not in value:
        return error(errors, "union_tag_not_found", loc, f"Unable to extract tag using discriminator '{key}'", value,
                     {"discriminator": f"'{key}'"})
    tag = value[key]
    if not isinstance(tag, str) or tag not in by_tag:
        expected = ", ".join(f"'{name}'" for name in by_tag)
        return error(errors, "union_tag_invalid", loc,
                     f"Input tag '{tag}' found using '{key}' does not match any of the expected tags: {expected}", value,
                     {"discriminator": f"'{key}'", "tag": str(tag), "expected_tags": expected})
    return check_spec(by_tag[tag], value, (*loc, tag), errors)


def _literal(expected: tuple, value: Any, loc: tuple, errors: list) -> Any:
    for option in expected:
        # a bool's literal also takes 0 and 1 (pydantic's lookup does)
        if (type(value) is type(option) or isinstance(option, bool) and type(value) is int) and value == option:
            return option
    words = [repr(option) for option in expected]
    listed = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    return error(errors, "literal_error", loc, f"Input should be {listed}", value, {"expected": listed})


def _enum(cls: type[enum.Enum], value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if isinstance(value, cls):
        return value
    if not config.strict:
        try:
            return cls(value)
        except ValueError:
            pass
    words = [repr(member.value) for member in cls]
    listed = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
    return error(errors, "enum", loc, f"Input should be {listed}", value, {"expected": listed})


def _list(item: Any, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if not isinstance(value, list) and (config.strict or not isinstance(value, tuple)):
        return error(errors, "list_type", loc, "Input should be a valid list", value)
    count = len(errors)
    items = [check(item, element, (*loc, index), errors, config) for index, element in enumerate(value)]
    return INVALID if len(errors) > count else items


def _dict(args: tuple, value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if not isinstance(value, dict):
        return error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
    key_type, item_type = args
    count = len(errors)
    checked = {}
    for key, item in value.items():
        good_key = check(key_type, key, (*loc, key, "[key]"), errors, config)
        good_item = check(item_type, item, (*loc, key), errors, config)
        if good_key is not INVALID and good_item is not INVALID:
            checked[good_key] = good_item
    return INVALID if len(errors) > count else checked


def _bool(value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if isinstance(value, bool):
        return value
    if not config.strict and value in (0, 1) and isinstance(value, int):
        return bool(value)
    if not config.strict and isinstance(value, str) and value.lower() in _WORDS:
        return _WORDS[value.lower()]
    return error(errors, "bool_type", loc, "Input should be a valid boolean", value)


_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def _int(value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if isinstance(value, int) and (not isinstance(value, bool) or not config.strict):
        return int(value)
    if not config.strict:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, float) and math.isfinite(value):
            return error(errors, "int_from_float", loc, "Input should be a valid integer, got a number with a fractional part", value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                return error(errors, "int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", value)
    return error(errors, "int_type", loc, "Input should be a valid integer", value)


def _float(value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if isinstance(value, (int, float)) and (not isinstance(value, bool) or not config.strict):
        try:
            return float(value)
        except OverflowError:  # an integer past float's range
            return error(errors, "float_type", loc, "Input should be a valid number", value)
    if not config.strict and isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return error(errors, "float_parsing", loc, "Input should be a valid number, unable to parse string as a number", value)
    return error(errors, "float_type", loc, "Input should be a valid number", value)


def _str(value: Any, loc: tuple, errors: list, config: Config) -> Any:
    if isinstance(value, str):
        return value
    return error(errors, "string_type", loc, "Input should be a valid string", value)


SCALARS = {bool: _bool, int: _int, float: _float, str: _str}
