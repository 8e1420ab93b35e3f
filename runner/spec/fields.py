"""How a spec's fields are declared: `Field(...)` (its default, the constraints, the description
and the key it is written as), the markers of a tagged union, the
validators, and the error a validation raises, shaped like pydantic's (type, loc, msg, input, ctx)
so that one formatter (runner.manifest.validate) words them for either."""

from __future__ import annotations

import builtins
import functools
import sys
from typing import Any, Callable, NamedTuple


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Rule(NamedTuple):
    """The constraints a value meets after its type is checked (pydantic's names)."""

    pattern: str | None = None
    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    min_length: int | None = None
    allow_inf_nan: bool = True
    discriminator: str | None = None  # the key that tells a union's members apart


class FieldInfo(NamedTuple):
    name: str
    annotation: Any  # the resolved type, Annotated parts included
    alias: str | None
    description: str | None
    rule: Rule
    default: Any
    default_factory: Any

    @property
    def key(self) -> str:
        """The key the field is written as."""
        return self.alias or self.name

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.default_factory is MISSING


class Declared(NamedTuple):
    """What a spec's class body says of a field (or an Annotated part of its constraints)."""

    default: Any = MISSING
    default_factory: Any = MISSING
    alias: str | None = None
    description: str | None = None
    rule: Rule = Rule()
    compare: bool = True  # part of equality (and of the hash, unless `hash` says otherwise)
    hash: bool | None = None


def Field(default: Any = MISSING, *, default_factory: Any = MISSING, alias: str | None = None, description: str | None = None,
          compare: bool = True, hash: bool | None = None, **rule: Any) -> Any:  # noqa: N802 (pydantic's name: the declarations read as they did)
    """A field of a spec, or (inside Annotated) constraints on a type: Field(default=1, ge=1).
    compare/hash as a dataclass field's: a dict in a frozen spec says hash=False."""
    return Declared(default, default_factory, alias, description, Rule(**rule), compare, hash)


def rule_of(marker: Any) -> Rule | None:
    """The constraints an Annotated part holds (a Field(...)), if any."""
    return marker.rule if isinstance(marker, Declared) else None


class Tag(NamedTuple):
    """The tag of one member of a union told apart by a Discriminator function."""

    tag: str


class Discriminator(NamedTuple):
    """A union's member chosen by a function of the value (None: no member fits, one error)."""

    function: Callable[[Any], str | None]
    custom_error_type: str
    custom_error_message: str


class Validator(NamedTuple):
    """A field validator (`before`: on the input, `after`: on the checked value) or a model
    validator (names empty; `before` only: on the input mapping)."""

    function: Any  # a classmethod
    names: tuple[str, ...]
    mode: str

    def __call__(self, owner: type, value: Any, info: ValidationInfo) -> Any:
        bound = self.function.__get__(None, owner)
        return bound(value, info) if self.function.__func__.__code__.co_argcount > 2 else bound(value)


def field_validator(*names: str, mode: str = "after") -> Callable[[Any], Validator]:
    return lambda function: Validator(function, names, mode)


def model_validator(*, mode: str) -> Callable[[Any], Validator]:
    if mode != "before":
        raise ValueError("model validators run before the fields are checked (mode='before')")
    return lambda function: Validator(function, (), mode)


class ValidationInfo(NamedTuple):
    data: dict[str, Any]  # the fields checked so far, by name
    field_name: str | None


class Config(NamedTuple):
    strict: bool = True  # `true` is no 1 and '1' no number: a wrong type is an error, never a guess
    extra: str = "forbid"  # or "allow": unknown keys are kept (records written by a newer version)
    frozen: bool = True
    positional: bool = False  # a plain data class's: Spec(1, 2) fills the fields in order


class ValidationError(ValueError):
    """The errors of one validation, as pydantic's `errors()` lists them."""

    def __init__(self, title: str, errors: list[dict[str, Any]]):
        self.title = title
        self._errors = errors
        lines = [f"{len(errors)} validation error{'s' if len(errors) != 1 else ''} for {title}"]
        for error in errors:
            lines += [".".join(str(part) for part in error["loc"]) or "(top level)", f"  {error['msg']}"]
        super().__init__("\n".join(lines))

    def errors(self) -> list[dict[str, Any]]:
        return [dict(error) for error in self._errors]


def is_spec(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "__spec_config__")


def spec_fields(cls: type) -> dict[str, FieldInfo]:
    """A spec's fields by name, their types resolved (once: a spec's module is loaded by then)."""
    found = cls.__dict__.get("__spec_fields__")
    if found is None:
        hints = {}
        for klass in reversed(cls.__mro__):
            scope = vars(sys.modules[klass.__module__])
            hints.update({name: _resolved(hint, scope) for name, hint in vars(klass).get("__annotations__", {}).items()})
        found = {
            name: FieldInfo(name, hints[name], said.alias, said.description, said.rule, said.default, said.default_factory)
            for name, said in cls.__spec_declared__.items()
        }
        cls.__spec_fields__ = found
    return found


def _resolved(hint: Any, scope: dict[str, Any]) -> Any:
    """An annotation written as a string, evaluated in its module (typing.get_type_hints compiles
    each string anew: a hundred compiles on `tftrain run`'s start path)."""
    if not isinstance(hint, str):
        return hint
    if hint.isidentifier():
        return scope[hint] if hint in scope else getattr(builtins, hint)
    return eval(_code(hint), scope)  # noqa: S307 (the module's own annotations)


@functools.lru_cache(maxsize=None)
def _code(hint: str) -> Any:
    return compile(hint, "<annotation>", "eval")


def spec_validators(cls: type) -> list[Validator]:
    """The validators of a spec and of its bases, the bases' first."""
    return [value for klass in reversed(cls.__mro__) for value in vars(klass).get("__spec_validators__", ())]
