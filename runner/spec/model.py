"""`Spec`: the base of tftrain's data classes — the manifest's, the run record's, and what a run
hands from stage to stage. A subclass is a keyword-only data class (frozen unless it says
otherwise: equality, hash and repr by its fields; `positional=True` also takes the fields in
order, as a dataclass does) with the small part of pydantic's model API the code uses:
model_validate(_json), model_copy, model_dump(_json), model_fields, model_post_init, iteration as
(name, value) pairs.

Not `dataclasses.dataclass`: it writes and compiles each class's methods, 1-3 ms a class, and
`tftrain run` has some eighty classes on its start path; these methods are shared."""

from __future__ import annotations

import copy
import enum
import json
import math
from typing import Any

from runner.spec.check import check_spec, validate
from runner.spec.fields import MISSING, Config, Declared, FieldInfo, ValidationError, Validator, spec_fields


class _Fields:
    """`model_fields` on the class and its instances: the fields by name, types resolved."""

    def __get__(self, instance: Any, owner: type) -> dict[str, FieldInfo]:
        return spec_fields(owner)


class Spec:
    __spec_config__ = Config()
    __spec_extra__ = {}  # keys kept from the input where the config allows them
    model_fields = _Fields()

    def __init_subclass__(
        cls, *, strict: bool | None = None, extra: str | None = None, frozen: bool | None = None, positional: bool | None = None, **kwargs
    ):
        super().__init_subclass__(**kwargs)
        base = cls.__spec_config__
        cls.__spec_config__ = Config(
            base.strict if strict is None else strict,
            base.extra if extra is None else extra,
            base.frozen if frozen is None else frozen,
            base.positional if positional is None else positional,
        )
        cls.__spec_doc__ = vars(cls).get("__doc__")
        validators = []
        for name, value in list(vars(cls).items()):
            if isinstance(value, Validator):
                validators.append(value)
                setattr(cls, name, value.function)
        cls.__spec_validators__ = tuple(validators)
        declared = dict(getattr(cls, "__spec_declared__", {}))  # a base's fields first, as a dataclass's
        for name in vars(cls).get("__annotations__", {}):
            value = vars(cls).get(name, MISSING)
            declared[name] = value if isinstance(value, Declared) else Declared(default=value)
            if isinstance(value, Declared):
                delattr(cls, name)
        cls.__spec_declared__ = declared
        cls.__spec_compared__ = tuple(name for name, said in declared.items() if said.compare)
        cls.__spec_hashed__ = tuple(name for name, said in declared.items() if (said.compare if said.hash is None else said.hash))
        if not cls.__spec_config__.frozen:
            cls.__hash__ = None  # a record changes: no hash

    def __init__(self, *args: Any, **values: Any):
        if args:
            self._positional(args, values)
        for name, said in self.__spec_declared__.items():
            if name in values:
                value = values.pop(name)
            elif said.default is not MISSING:
                value = said.default
            elif said.default_factory is not MISSING:
                value = said.default_factory()
            else:
                raise TypeError(f"{type(self).__name__}() missing keyword argument {name!r}")
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments {', '.join(map(repr, values))}")
        self.model_post_init(None)

    def _positional(self, args: tuple, values: dict[str, Any]) -> None:
        names = list(self.__spec_declared__)
        if not self.__spec_config__.positional:
            raise TypeError(f"{type(self).__name__}() takes keyword arguments only")
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, {len(args)} given")
        for name, value in zip(names, args):
            if name in values:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
            values[name] = value

    def model_post_init(self, context: Any) -> None:
        """After the fields are set (pydantic's hook); a frozen spec sets with object.__setattr__."""

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__spec_config__.frozen:
            raise AttributeError(f"{type(self).__name__} is frozen: cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__spec_config__.frozen:
            raise AttributeError(f"{type(self).__name__} is frozen: cannot delete field {name!r}")
        object.__delattr__(self, name)

    def _values(self, names: tuple[str, ...]) -> tuple:
        return (*(getattr(self, name) for name in names), tuple(self.__spec_extra__.items()))

    def __eq__(self, other: Any) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values(self.__spec_compared__) == other._values(self.__spec_compared__)

    def __hash__(self) -> int:
        return hash((type(self), self._values(self.__spec_hashed__)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__spec_declared__)
        return f"{type(self).__name__}({shown})"

    @classmethod
    def model_validate(cls, data: Any) -> Any:
        return validate(cls, data, cls.__spec_config__, cls.__name__)

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Any:
        """ValueError (json's or the validation's) when the text is no valid instance; the errors
        name JSON's kinds, as pydantic's do (an object, an array)."""
        try:
            return cls.model_validate(json.loads(text))
        except ValidationError as exc:
            errors = [{**error, "msg": _JSON_WORDS.get(error["type"], error["msg"])} for error in exc.errors()]
            raise ValidationError(exc.title, errors) from None

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy with `update`'s fields replaced, not checked again (as pydantic's)."""
        made = copy.deepcopy(self) if deep else copy.copy(self)
        for name, value in (update or {}).items():
            object.__setattr__(made, name, value)
        return made

    def model_dump(self, *, mode: str = "python", by_alias: bool = False, exclude: set[str] | frozenset[str] = frozenset()) -> dict:
        data = {}
        for name, field in spec_fields(type(self)).items():
            if name not in exclude:
                data[field.key if by_alias else name] = dump(getattr(self, name), mode, by_alias)
        for key, value in self.__spec_extra__.items():
            if key not in exclude:
                data[key] = dump(value, mode, by_alias)
        return data

    def model_dump_json(self, *, by_alias: bool = False) -> str:
        """Compact JSON; a number that is no finite one is null (JSON has no such number)."""
        return json.dumps(_finite(self.model_dump(mode="json", by_alias=by_alias)), separators=(",", ":"), ensure_ascii=False)

    def __iter__(self):
        for name in spec_fields(type(self)):
            yield name, getattr(self, name)
        yield from self.__spec_extra__.items()


_JSON_WORDS = {"dict_type": "Input should be an object", "model_type": "Input should be an object", "list_type": "Input should be a valid array"}


def dump(value: Any, mode: str, by_alias: bool) -> Any:
    if isinstance(value, Spec):
        return value.model_dump(mode=mode, by_alias=by_alias)
    if isinstance(value, dict):
        return {key: dump(item, mode, by_alias) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [dump(item, mode, by_alias) for item in value]
    if mode == "json" and isinstance(value, enum.Enum):
        return value.value
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


__all__ = ["Spec", "check_spec", "dump"]
