"""The manifest's pydantic models, as tftrain relies on them (runner/spec re-implemented these
rules before): strict scalars, patterns that end at the text's end, unknown keys refused, frozen
values; and what a run hands between stages is a frozen data class."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.manifest.model import Manifest

MINIMAL = {"name": "demo", "entry_script": "train.py"}


def refusal(project, manifest: str) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifest(project(manifest=manifest))
    return str(info.value).split(": ", 1)[1]  # without FILE:LINE


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ("node_count: true\n", "node_count: Input should be a valid integer"),  # `true` is not 1
        ("node_count: '2'\n", "node_count: Input should be a valid integer"),  # nor '2' a number
        ("user_managed: 'yes'\n", "user_managed: Input should be a valid boolean"),  # 'yes' is not true
        ("user_managed: 1\n", "user_managed: Input should be a valid boolean"),
        ("max_run_duration_seconds: 1.5\n", "max_run_duration_seconds: Input should be a valid integer"),
    ],
)
def test_a_wrong_type_is_refused_never_coerced(project, manifest, words):
    assert refusal(project, manifest) == words


def test_a_pattern_ends_at_the_end_of_the_text():
    with pytest.raises(ValidationError) as info:
        Manifest.model_validate({**MINIMAL, "name": "demo\n"})  # Python's `$` would take it
    assert [error["type"] for error in info.value.errors()] == ["string_pattern_mismatch"]


def test_models_are_frozen_and_copied_with_changes():
    manifest = Manifest.model_validate(MINIMAL)
    with pytest.raises(ValidationError):
        manifest.name = "other"
    assert manifest.model_copy(update={"name": "other"}).name == "other" and manifest.name == "demo"


def test_an_alias_or_the_field_name_is_taken():
    assert Manifest.model_validate({**MINIMAL, "model": {"register": False}}).model.register_model is False
    assert Manifest.model_validate({**MINIMAL, "model": {"register_model": False}}).model.register_model is False


def test_what_a_run_hands_on_is_an_immutable_named_tuple(project):
    loaded = load_manifest(project())
    with pytest.raises(AttributeError):
        loaded.path = None
    assert loaded._replace(warnings=("w",)).warnings == ("w",) and loaded.warnings == ()
