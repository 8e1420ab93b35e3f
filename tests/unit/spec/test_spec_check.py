"""runner.spec.check: pydantic's rules and error dicts for what the specs use, without pydantic."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Union

import pytest

from runner.spec import Discriminator, Field, Spec, Tag, ValidationError, field_validator, model_validator
from runner.spec.check import validate


class Inner(Spec):
    size: int = Field(default=1, ge=1, le=10)


class Cat(Spec):
    kind: Literal["cat"]
    lives: int = 9


class Dog(Spec):
    """A dog."""

    kind: Literal["dog"]
    name: str = Field(default="rex", pattern=r"^[a-z]+$", min_length=2)


def _form(value: Any) -> str | None:
    return {str: "text", int: "number"}.get(type(value))


Pet = Annotated[Union[Cat, Dog], Field(discriminator="kind")]
Form = Annotated[
    Union[Annotated[str, Tag("text")], Annotated[int, Tag("number")]],
    Discriminator(_form, custom_error_type="value_form", custom_error_message="must be text or a number"),
]


class Outer(Spec):
    name: str
    ratio: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    on: bool = False
    mode: Literal["a", "b", "c"] = "a"
    maybe: int | None = Field(default=None, ge=0)
    items: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, min_length=1)
    table: dict[str, Inner] = Field(default_factory=dict)
    inner: Inner = Field(default_factory=Inner)
    pet: Pet | None = None
    form: Form = "x"
    registered: bool = Field(default=True, alias="register")

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_bool(cls, value):
        return "c" if value is True else value

    @field_validator("name")
    @classmethod
    def _no_dots(cls, value: str, info) -> str:
        if "." in value:
            raise ValueError(f"{info.field_name} {value!r} has a dot")
        return value


def errors(data: dict) -> list[tuple]:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return [(e["type"], e["loc"], e["msg"]) for e in caught.value.errors()]


def test_defaults_aliases_and_nested_specs():
    outer = Outer.model_validate({"name": "x", "register": False, "table": {"t": {"size": 3}}, "ratio": 2})
    assert outer.registered is False and outer.table["t"] == Inner(size=3) and outer.inner == Inner()
    assert outer.ratio == 2.0 and isinstance(outer.ratio, float)  # strict float takes an int, as pydantic's
    assert Outer.model_validate({"name": "x", "registered": False}).registered is False  # by name too
    assert Outer.model_validate({"name": "x", "mode": True}).mode == "c"  # a before validator


def test_strict_scalars_are_never_guessed():
    assert errors({"name": 1, "on": 1, "maybe": 1.0, "ratio": True}) == [
        ("string_type", ("name",), "Input should be a valid string"),
        ("float_type", ("ratio",), "Input should be a valid number"),
        ("bool_type", ("on",), "Input should be a valid boolean"),
        ("int_type", ("maybe",), "Input should be a valid integer"),
    ]


def test_constraints_and_literals_word_their_errors_as_pydantic():
    assert errors({"name": "x", "ratio": float("nan"), "mode": "d", "maybe": -1, "items": [], "inner": {"size": 11}}) == [
        ("finite_number", ("ratio",), "Input should be a finite number"),
        ("literal_error", ("mode",), "Input should be 'a', 'b' or 'c'"),
        ("greater_than_equal", ("maybe",), "Input should be greater than or equal to 0"),
        ("too_short", ("items",), "List should have at least 1 item after validation, not 0"),
        ("less_than_equal", ("inner", "size"), "Input should be less than or equal to 10"),
    ]
    assert errors({"name": "x", "items": [1, -2]}) == [("greater_than_equal", ("items", 1), "Input should be greater than or equal to 0")]
    assert errors({"name": "x", "ratio": 0}) == [("greater_than", ("ratio",), "Input should be greater than 0")]


def test_missing_extra_and_non_string_keys():
    assert errors({"nme": "x", 3: 1, "table": {"t": {"sise": 1}}}) == [
        ("missing", ("name",), "Field required"),
        ("extra_forbidden", ("table", "t", "sise"), "Extra inputs are not permitted"),
        ("extra_forbidden", ("nme",), "Extra inputs are not permitted"),  # the fields' errors first, then the keys in order
        ("invalid_key", (3,), "Keys should be strings"),
    ]
    assert errors({"name": "x", "table": {1: {}}}) == [("string_type", ("table", 1, "[key]"), "Input should be a valid string")]
    assert errors({"name": "x", "inner": 3}) == [("model_type", ("inner",), "Input should be a valid dictionary or instance of Inner")]


def test_validators_raise_value_errors_with_the_field_in_info():
    assert errors({"name": "a.b"}) == [("value_error", ("name",), "Value error, name 'a.b' has a dot")]


def test_a_union_keyed_by_a_field_names_the_member_it_tried():
    assert Outer.model_validate({"name": "x", "pet": {"kind": "dog"}}).pet == Dog(kind="dog")
    assert errors({"name": "x", "pet": {"kind": "dog", "name": "Rex"}}) == [
        ("string_pattern_mismatch", ("pet", "dog", "name"), "String should match pattern '^[a-z]+$'")
    ]
    assert errors({"name": "x", "pet": {"kind": "cow"}}) == [
        ("union_tag_invalid", ("pet",), "Input tag 'cow' found using 'kind' does not match any of the expected tags: 'cat', 'dog'")
    ]
    assert errors({"name": "x", "pet": {}}) == [("union_tag_not_found", ("pet",), "Unable to extract tag using discriminator 'kind'")]
    assert errors({"name": "x", "pet": "cat"}) == [
        ("model_attributes_type", ("pet",), "Input should be a valid dictionary or object to extract fields from")
    ]


def test_a_union_told_apart_by_a_function_gives_one_error():
    assert Outer.model_validate({"name": "x", "form": 3}).form == 3
    assert errors({"name": "x", "form": 1.5}) == [("value_form", ("form",), "must be text or a number")]


def test_model_validators_see_the_input_first():
    class Renamed(Spec):
        on: list[str] = Field(default_factory=list)

        @model_validator(mode="before")
        @classmethod
        def _yaml_on(cls, data):
            return {("on" if key is True else key): value for key, value in data.items()}

    assert Renamed.model_validate({True: ["x"]}).on == ["x"]


class Status(str, enum.Enum):
    UP = "Up"
    DOWN = "Down"


class Record(Spec, strict=False, extra="allow", frozen=False):
    status: Status
    count: int = 0
    value: float | str = 0.0


def test_lax_specs_coerce_keep_unknown_keys_and_change():
    record = Record.model_validate({"status": "Up", "count": "3", "value": "nan", "later": [1]})
    assert (record.status, record.count, record.value) == (Status.UP, 3, "nan")
    assert record.model_dump(mode="json") == {"status": "Up", "count": 3, "value": "nan", "later": [1]}
    record.count = 4
    assert dict(record)["count"] == 4
    with pytest.raises(ValidationError, match="Input should be 'Up' or 'Down'"):
        Record.model_validate({"status": "Sideways"})
    with pytest.raises(ValueError):  # json's error is a ValueError too
        Record.model_validate_json(b"{broken")
    assert Record.model_validate({"status": "Up", "count": True}).count == 1  # lax: a boolean is a number
    with pytest.raises(ValidationError) as caught:
        Record.model_validate_json(b'{"status": "Up", "value": []}')
    assert [(e["loc"], e["msg"]) for e in caught.value.errors()] == [
        (("value", "float"), "Input should be a valid number"), (("value", "str"), "Input should be a valid string"),
    ]


def test_validate_takes_any_type():
    assert validate(Pet, {"kind": "cat"}) == Cat(kind="cat", lives=9)
    assert validate(list[int], (1, 2)) == [1, 2]  # lax: a tuple is a list


def test_pydantic_edges_a_yaml_file_can_reach():
    # pydantic's patterns are Rust's: `$` is the end of the text, a final newline included
    assert errors({"name": "x", "pet": {"kind": "dog", "name": "rex\n"}})[0][0] == "string_pattern_mismatch"
    # an integer past float's range is no number, not an OverflowError
    assert errors({"name": "x", "ratio": 10**400}) == [("float_type", ("ratio",), "Input should be a valid number")]
