"""The package's shape: its import graph has no circle, and its top level stays small."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "runner"
TOP_LEVEL = {
    "__init__",
    "__main__",
    "errors",
    "paths",
    "settings",
    "templates",
    "api",
    "keras",
}  # shared facts: runner/shared/


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py") if "shims" not in path.parts}


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """Every runner module that `path` imports, at its top or inside a function (a lazy import
    still ties two modules together). `from a.b import c` is a.b.c when that is a module, else a.b."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
    return {name for name in found if name in known and name != "runner"}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_imports_in_no_circle():
    known = modules()
    graph = {name: imports_of(path, known) for name, path in known.items()}
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_top_level_holds_only_the_shared_modules():
    assert {path.stem for path in PACKAGE.glob("*.py")} == TOP_LEVEL


def test_no_two_test_files_share_a_name():
    """pytest imports test modules by their file name (tests/ has no packages): two files of one
    name stop the whole suite at collection."""
    from collections import Counter

    names = Counter(path.name for path in (REPO / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
