"""The spec layer: frozen data classes declared like pydantic models (Field, validators, tagged
unions), checked with pydantic's rules and error wording, and their JSON Schema, without pydantic
(whose import and model building took most of `tftrain run`'s start)."""

from __future__ import annotations

from runner.spec.fields import Discriminator, Field, Tag, ValidationError, field_validator, model_validator
from runner.spec.model import Spec

__all__ = ["Discriminator", "Field", "Spec", "Tag", "ValidationError", "field_validator", "model_validator"]
