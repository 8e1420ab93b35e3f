"""runner.environments: one small API, loaded room by room, and the only door into the wing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

import runner.environments as environments


def test_every_name_of_the_api_is_its_rooms_own():
    import importlib

    for name, room in environments._API.items():
        assert getattr(environments, name) is getattr(importlib.import_module(f"runner.environments.{room}"), name)
    with pytest.raises(AttributeError):
        environments.no_such_name  # noqa: B018


def test_the_wings_rooms_import_each_other_not_the_package():
    """The API loads a room when asked: a room importing the package would load itself in a circle."""
    for path in Path(environments.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "runner.environments" not in imported, path.name


def test_nothing_outside_the_targets_imports_a_backend():
    backends = tuple(f"runner.targets.{name}." for name in ("local", "docker", "kubernetes", "pool"))
    allowed: set[str] = set()  # none: `tftrain pool` goes through runner.targets.factory.target_command
    found = []
    for path in (REPO / "runner").rglob("*.py"):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("runner/targets/") or relative in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(backends):
                found.append(f"{relative}: {node.module}")
    assert found == []
