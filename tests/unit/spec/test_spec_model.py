"""runner.spec.model and runner.spec.schema: frozen keyword-only specs with pydantic's small API,
and their JSON Schema in pydantic's shape."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Literal, Union

import pytest

from runner.spec import Field, Spec
from runner.spec.schema import json_schema


class Point(Spec):
    """A point."""

    x: float = 0.0
    tags: list[str] = Field(default_factory=list, description="Labels")


class Line(Spec):
    kind: Literal["line"]
    start: Point = Field(default_factory=Point)
    end: Point | None = None
    width: int = Field(default=1, ge=1, le=9, alias="stroke")


class Dot(Spec):
    kind: Literal["dot"]


class Drawing(Spec):
    shapes: list[Annotated[Union[Line, Dot], Field(discriminator="kind")]] = Field(default_factory=list, min_length=1)
    name: str = Field(pattern=r"^\w+$")


def test_specs_are_frozen_keyword_only_and_compare_by_value():
    point = Point(x=1.0)
    with pytest.raises(AttributeError, match="frozen"):
        point.x = 2.0
    with pytest.raises(TypeError):
        Point(1.0)
    with pytest.raises(TypeError, match="unexpected"):
        Point(y=1)
    assert point == Point(x=1.0, tags=[]) and point != Point() and hash(Dot(kind="dot")) == hash(Dot(kind="dot"))
    assert Point().tags is not Point().tags  # a factory per instance
    assert repr(Point(x=1.0)) == "Point(x=1.0, tags=[])"


def test_copy_dump_and_iterate():
    line = Line.model_validate({"kind": "line", "stroke": 2, "end": {"x": 3}})
    moved = line.model_copy(update={"width": 5})
    assert (moved.width, line.width, moved.end is line.end) == (5, 2, True)
    assert copy.deepcopy(line) == line and line.model_copy(deep=True).end is not line.end
    assert line.model_dump() == {"kind": "line", "start": {"x": 0.0, "tags": []}, "end": {"x": 3.0, "tags": []}, "width": 2}
    assert line.model_dump(by_alias=True, exclude={"start", "end"}) == {"kind": "line", "stroke": 2}
    assert dict(line)["end"] == Point(x=3.0)
    assert json.loads(Point(x=float("inf")).model_dump_json()) == {"x": None, "tags": []}  # JSON has no inf
    assert Line.model_fields["width"].alias == "stroke" and Line.model_fields["end"].annotation == Point | None


def test_the_schema_has_pydantic_shape():
    schema = json_schema(Drawing)
    assert schema["required"] == ["name"] and schema["additionalProperties"] is False
    assert schema["properties"]["name"] == {"pattern": r"^\w+$", "title": "Name", "type": "string"}
    shapes = schema["properties"]["shapes"]
    assert shapes["minItems"] == 1 and shapes["items"]["discriminator"] == {
        "propertyName": "kind", "mapping": {"line": "#/$defs/Line", "dot": "#/$defs/Dot"},
    }
    line = schema["$defs"]["Line"]["properties"]
    assert line["kind"] == {"const": "line", "title": "Kind", "type": "string"}
    assert line["start"] == {"$ref": "#/$defs/Point"}  # a spec is referenced, untitled, its factory unwritten
    assert line["end"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None}
    assert line["stroke"] == {"default": 1, "maximum": 9, "minimum": 1, "title": "Stroke", "type": "integer"}
    assert schema["$defs"]["Point"]["description"] == "A point." and "description" not in schema["$defs"]["Dot"]
    assert schema["$defs"]["Point"]["properties"]["tags"] == {"description": "Labels", "items": {"type": "string"}, "title": "Tags", "type": "array"}
