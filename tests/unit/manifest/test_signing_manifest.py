"""model.signing: the key's secrets: entry, each bad value one line naming the field."""

from __future__ import annotations

import pytest
from manifest_errors import error_of, one_line_error

from runner.manifest import load_manifest


@pytest.mark.parametrize(
    "manifest, error",
    [
        (
            "model: {signing: {private_key_secret: SIGNING_KEY}}\n",
            "4: model.signing.private_key_secret: 'SIGNING_KEY' is not in secrets (none listed)",
        ),
        (
            "secrets: [OTHER]\nmodel: {signing: {private_key_secret: SIGNING_KEY}}\n",
            "5: model.signing.private_key_secret: 'SIGNING_KEY' is not in secrets (OTHER)",
        ),
        (
            "secrets: [K]\nmodel: {signing: {private_key_secret: 'not a name'}}\n",
            "5: model.signing.private_key_secret:",
        ),
        ("secrets: [K]\nmodel: {signing: {}}\n", "5: model.signing.private_key_secret:"),
    ],
)
def test_bad_signing_settings_are_one_line(project, manifest, error):
    assert "-----BEGIN" not in one_line_error(project, manifest, error)


def test_a_signing_key_in_secrets_loads(project):
    manifest = load_manifest(
        project(manifest="secrets: [SIGNING_KEY]\nmodel: {signing: {private_key_secret: SIGNING_KEY}}\n")
    ).manifest
    assert manifest.model.signing.private_key_secret == "SIGNING_KEY"


def test_a_key_written_in_the_manifest_is_refused_and_not_echoed(project):
    message = error_of(
        project, "secrets: [K]\nmodel: {signing: {private_key: '-----BEGIN EC PRIVATE KEY----- MHcCAQEEI'}}\n"
    )
    assert "5: model.signing.private_key: unknown key; did you mean 'private_key_secret'?" in message
    assert "MHcCAQEEI" not in message
