"""An environment that has the real Azure ML SDK keeps it (the layer checks with that environment's python)."""

from __future__ import annotations

from builders import loaded

from runner.compat import azureml_reason


def test_an_environment_with_the_real_sdk_keeps_it(tmp_path):
    import sys

    sdk = tmp_path / "site" / "azureml" / "core"
    sdk.mkdir(parents=True)
    (sdk / "__init__.py").write_text("")
    (sdk.parent / "__init__.py").write_text("")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    azure = loaded(tmp_path, "from azureml.core import Run\n")
    assert azureml_reason(azure, str(python)) is None
    assert azureml_reason(azure, sys.executable) is not None
