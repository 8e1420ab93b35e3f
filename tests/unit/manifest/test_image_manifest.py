"""image_registry / user_managed / python: each bad value one line naming the field."""

from __future__ import annotations

import pytest
from manifest_errors import error_of, one_line_error

from runner.manifest import load_manifest

PRIVATE = "use_docker: true\ncustom_docker_image: localhost:5000/team/tf:1\n"
REGISTRY = "image_registry: {address: 'localhost:5000', username: ci, password_secret: REGISTRY_PASSWORD}\n"


@pytest.mark.parametrize(
    "manifest, error",
    [
        (PRIVATE + REGISTRY, "6: image_registry.password_secret: 'REGISTRY_PASSWORD' is not in secrets (none listed)"),
        ("use_docker: true\nsecrets: [REGISTRY_PASSWORD]\n" + REGISTRY, "6: image_registry: needs custom_docker_image"),
        (
            PRIVATE + "image_registry: {address: 'a b', username: ci, password_secret: P}\n",
            "6: image_registry.address:",
        ),
        (
            PRIVATE + "image_registry: {address: x, username: ci, password_secret: 'not-a-name'}\n",
            "6: image_registry.password_secret:",
        ),
        (
            "user_managed: true\npip_packages: [numpy]\n",
            "5: pip_packages: user_managed: true installs nothing; remove pip_packages",
        ),
        ("user_managed: true\nconda_packages: [numpy]\n", "5: conda_packages: user_managed: true installs nothing"),
        ("python: /usr/bin/python3\n", "4: python: needs user_managed: true"),
        ("user_managed: 1\n", "4: user_managed:"),
    ],
)
def test_bad_image_settings_are_one_line(project, manifest, error):
    one_line_error(project, manifest, error)


def test_a_password_written_in_the_manifest_is_refused(project):
    message = error_of(
        project,
        PRIVATE + "secrets: [P]\nimage_registry: {address: 'localhost:5000', username: ci, password: hunter2}\n",
    )
    assert "7: image_registry.password: unknown key; did you mean 'password_secret'?" in message
    assert "hunter2" not in message


def test_a_private_image_and_a_user_managed_environment_load(project):
    manifest = load_manifest(
        project(manifest=PRIVATE + "secrets: [REGISTRY_PASSWORD]\n" + REGISTRY + "user_managed: true\n")
    ).manifest
    assert manifest.image_registry.host == "localhost:5000"
    assert (manifest.image_registry.username, manifest.image_registry.password_secret) == ("ci", "REGISTRY_PASSWORD")
    assert manifest.user_managed and manifest.python is None
    local = load_manifest(project(manifest="user_managed: true\npython: /opt/env/bin/python\n")).manifest
    assert local.python == "/opt/env/bin/python"
