"""YAML loading that remembers where every key came from, so errors can name the line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ManifestError

Location = tuple[Any, ...]


@dataclass(frozen=True)
class YamlDocument:
    path: Path
    data: Any
    lines: dict[Location, int]

    def line_of(self, loc: Location) -> int | None:
        """The line of the deepest key of `loc` that exists in the file."""
        best = self.lines.get((), None)
        for i in range(1, len(loc) + 1):
            line = self.lines.get(tuple(loc[:i]))
            if line is not None:
                best = line
        return best

    def where(self, loc: Location) -> str:
        line = self.line_of(loc)
        return f"{self.path}:{line}" if line else str(self.path)


def load_yaml(path: Path) -> YamlDocument:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path}: manifest not found (give another path with -f)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(f"{where}: invalid YAML: {problem}") from None
    if node is None:
        return YamlDocument(path, {}, {(): 1})
    lines: dict[Location, int] = {(): node.start_mark.line + 1}
    data = _construct(node, (), lines, path)
    return YamlDocument(path, data, lines)


def _construct(node: yaml.Node, loc: Location, lines: dict[Location, int], path: Path) -> Any:
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node, path)
            if isinstance(key, (dict, list)):
                raise ManifestError(f"{path}:{key_node.start_mark.line + 1}: keys must be plain values")
            if key in result:
                raise ManifestError(f"{path}:{key_node.start_mark.line + 1}: duplicate key {key!r}")
            child = (*loc, key)
            lines[child] = key_node.start_mark.line + 1
            result[key] = _construct(value_node, child, lines, path)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            child = (*loc, index)
            lines[child] = item_node.start_mark.line + 1
            items.append(_construct(item_node, child, lines, path))
        return items
    return _scalar(node, path)


def _scalar(node: yaml.Node, path: Path) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return _construct(node, (), {}, path)
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}:{node.start_mark.line + 1}: {exc}") from None
    finally:
        loader.dispose()
