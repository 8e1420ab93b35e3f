"""Shared fixtures: a fresh TFTRAIN_HOME per test, manifests written on the fly, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory) -> Path:
    """One virtualenv cache for the session: the example's environment is built once."""
    return tmp_path_factory.mktemp("env-cache")


@pytest.fixture
def home(tmp_path, monkeypatch, env_cache) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(env_cache))
    return home


@pytest.fixture
def project(tmp_path):
    """project(script, manifest_yaml) → path of a tftrain.yml next to src/train.py."""

    def make(script: str = "print('hello')\n", manifest: str = "", name: str = "demo") -> Path:
        root = tmp_path / "project"
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / "src" / "train.py").write_text(textwrap.dedent(script))
        text = f"name: {name}\nsource_directory: src\nentry_script: train.py\n" + textwrap.dedent(manifest)
        (root / "tftrain.yml").write_text(text)
        return root / "tftrain.yml"

    return make


def tftrain(*args: str, timeout: float = 600, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TFTRAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        **kwargs,
    )


@pytest.fixture
def cli():
    return tftrain


@pytest.fixture
def repo() -> Path:
    return REPO
