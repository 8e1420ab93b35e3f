"""The one error a bad manifest gives, less its path (the unit tests of the manifest's sections)."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest


def error_of(project, manifest: str) -> str:
    path = project(manifest=manifest)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert info.value.exit_code == 3
    return str(info.value).replace(f"{path}:", "", 1)


def one_line_error(project, manifest: str, starts: str) -> str:
    """error_of, held to one line that begins with `starts` (FILE's LINE: the field: ...)."""
    message = error_of(project, manifest)
    assert message.startswith(starts), message
    assert "\n" not in message
    return message
