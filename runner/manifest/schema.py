"""The manifest's JSON Schema (`tftrain schema`, tftrain.schema.json), from the data model."""

from __future__ import annotations

import json

from pydantic.json_schema import GenerateJsonSchema

from runner.manifest.sweep import SweptManifest


class _Schema(GenerateJsonSchema):
    """A union told apart by a function (a script parameter's forms) is `anyOf`: as `oneOf`, an
    integer would match both `integer` and `number` and be refused by editors."""

    def tagged_union_schema(self, schema):
        generated = super().tagged_union_schema(schema)
        if "oneOf" in generated and "discriminator" not in generated:
            generated["anyOf"] = generated.pop("oneOf")
        return generated


def json_schema() -> str:
    schema = SweptManifest.model_json_schema(schema_generator=_Schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tftrain manifest (tftrain.yml)"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
