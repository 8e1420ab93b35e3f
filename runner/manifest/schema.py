"""The manifest's JSON Schema (`tftrain schema`, tftrain.schema.json), from the data model."""

from __future__ import annotations

import json

from runner.manifest.model import Manifest
from runner.spec.schema import json_schema as spec_schema


def json_schema() -> str:
    schema = spec_schema(Manifest)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tftrain manifest (tftrain.yml)"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
