"""YAML loading that remembers where every key came from, so errors can name the line.

The file is untrusted text. It is built from the parser's events, one at a time and without
recursion, into plain values only (strings, numbers, booleans, null, lists, mappings); the file's
size, the nesting depth and what aliases expand to are bounded while it is read, so a hostile
file (billion laughs, an alias that contains itself, thousands of nested brackets) fails at once
with one line `FILE:LINE: field: message`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.reader import Reader
from yaml.resolver import Resolver

from runner.errors import ManifestError
from runner.manifest.document import Location, YamlDocument, format_loc, one_line

MAX_DEPTH = 16  # nested lists and mappings (a manifest needs 4)
MAX_VALUES = 20_000  # values once aliases are expanded
MAX_CHARS = 2 << 20  # characters of text once aliases are expanded
MAX_NUMBER_CHARS = 64  # longer numbers are refused (int() of huge digit strings is slow or refused)

_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_EXPLICIT_SCALARS = {_TAG + kind for kind in ("str", "int", "float", "bool", "null")}
_SURROGATE = re.compile("[\ud800-\udfff]")
_RESOLVER = Resolver()
_CONSTRUCTOR = SafeConstructor()


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_NONE = _Marker("(none)")
_MERGE = _Marker("<<")


def parse(path: Path, text: str) -> YamlDocument:
    """`text` (the file at `path`) as plain values, every limit checked on the way."""
    builder = _Builder(path)
    bad = Reader.NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise ManifestError(
            one_line(f"{path}:{line}: (top level): invalid YAML: character U+{ord(bad.group()):04X} is not allowed")
        )
    try:
        for event in yaml.parse(text, Loader=_PARSER):
            builder.feed(event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "cannot be parsed"
        builder.fail(builder.here(), line, f"invalid YAML: {problem}")
    except yaml.YAMLError as exc:  # a ReaderError: it has a position, no mark
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        builder.fail(builder.here(), line, f"invalid YAML: {getattr(exc, 'reason', None) or exc}")
    return builder.document()


def _short(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


@dataclass(frozen=True)
class _Anchor:
    value: Any
    values: int  # what one more use of it adds to the totals
    chars: int
    height: int  # nested lists and mappings in it (0 for a plain value)


@dataclass
class _Open:
    """A list or mapping being read."""

    value: Any
    loc: Location
    line: int
    anchor: str | None
    depth: int
    values_before: int
    chars_before: int
    deepest: int
    key: Any = _NONE  # a mapping's key, read, waiting for its value
    key_line: int = 0
    merges: list[tuple[dict, int]] = field(default_factory=list)


class _Builder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.stack: list[_Open] = []
        self.anchors: dict[str, _Anchor] = {}
        self.open_anchors: set[str] = set()
        self.lines: dict[Location, int] = {}
        self.root: Any = _NONE
        self.documents = 0
        self.values = 0
        self.chars = 0

    def fail(self, loc: Location, line: int | None, message: str):
        where = f"{self.path}:{line}" if line else str(self.path)
        raise ManifestError(one_line(f"{where}: {format_loc(loc)}: {message}"))

    def here(self) -> Location:
        return self.stack[-1].loc if self.stack else ()

    def document(self) -> YamlDocument:
        if self.root is _NONE:
            return YamlDocument(self.path, {}, {(): 1}, empty=True)
        return YamlDocument(self.path, self.root, self.lines)

    def feed(self, event: yaml.Event) -> None:
        line = event.start_mark.line + 1
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                self.fail((), line, "only one YAML document is allowed (a second one starts here)")
        elif isinstance(event, yaml.ScalarEvent):
            loc, is_key = self._slot()
            value = self._scalar(event, loc, is_key, line)
            chars = len(value) if isinstance(value, str) else 0
            self._count(1, chars, loc, line)
            if event.anchor is not None:
                self.anchors[event.anchor] = _Anchor(value, 1, chars, 0)
            self._place(value, loc, line)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event.anchor, line)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._start(event, line)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self._end()

    def _slot(self) -> tuple[Location, bool]:
        """Where the next value goes, and whether it is a mapping's key."""
        if not self.stack:
            return (), False
        top = self.stack[-1]
        if isinstance(top.value, list):
            return (*top.loc, len(top.value)), False
        if top.key is _NONE:
            return top.loc, True
        return (*top.loc, "<<" if top.key is _MERGE else top.key), False

    def _start(self, event: yaml.CollectionStartEvent, line: int) -> None:
        mapping = isinstance(event, yaml.MappingStartEvent)
        loc, is_key = self._slot()
        if is_key:
            self.fail(loc, line, "keys must be plain values, not lists or mappings")
        if event.tag not in (None, "!", _TAG + ("map" if mapping else "seq")):
            self.fail(loc, line, f"tag {_short(event.tag)} is not allowed: only plain YAML values")
        depth = len(self.stack) + 1
        if depth > MAX_DEPTH:
            self.fail(loc, line, f"nested deeper than {MAX_DEPTH} levels")
        self._count(1, 0, loc, line)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        value: Any = {} if mapping else []
        self.stack.append(_Open(value, loc, line, event.anchor, depth, self.values, self.chars, depth))

    def _end(self) -> None:
        node = self.stack.pop()
        value = self._merged(node) if node.merges else node.value
        if node.anchor is not None:
            self.open_anchors.discard(node.anchor)
            height = node.deepest - node.depth + 1
            self.anchors[node.anchor] = _Anchor(
                value, self.values - node.values_before, self.chars - node.chars_before, height
            )
        if self.stack:
            self.stack[-1].deepest = max(self.stack[-1].deepest, node.deepest)
        self._place(value, node.loc, node.line)

    def _alias(self, name: str, line: int) -> None:
        loc, is_key = self._slot()
        if name in self.open_anchors:
            self.fail(loc, line, f"alias *{name} refers to a value that contains it")
        anchor = self.anchors.get(name)
        if anchor is None:
            self.fail(loc, line, f"alias *{name} has no anchor &{name} before it")
        if is_key and anchor.height:
            self.fail(loc, line, "keys must be plain values, not lists or mappings")
        if is_key and anchor.value is _MERGE:
            self.fail(loc, line, "a merge key (<<) cannot come from an alias")
        depth = len(self.stack) + anchor.height
        if depth > MAX_DEPTH:
            self.fail(loc, line, f"alias *{name} nests deeper than {MAX_DEPTH} levels")
        if self.stack:
            self.stack[-1].deepest = max(self.stack[-1].deepest, depth)
        self._count(anchor.values, anchor.chars, loc, line)
        self._place(anchor.value, loc, line)

    def _count(self, values: int, chars: int, loc: Location, line: int) -> None:
        self.values += values
        self.chars += chars
        if self.values > MAX_VALUES:
            self.fail(loc, line, f"more than {MAX_VALUES} values once aliases are expanded")
        if self.chars > MAX_CHARS:
            self.fail(loc, line, f"more than {MAX_CHARS >> 20} MiB of text once aliases are expanded")

    def _place(self, value: Any, loc: Location, line: int) -> None:
        if not self.stack:
            self.root = value
            self.lines[()] = line
            return
        top = self.stack[-1]
        if isinstance(top.value, list):
            top.value.append(value)
            self.lines[loc] = line
        elif top.key is _NONE:
            if value is not _MERGE and value in top.value:
                self.fail((*top.loc, value), line, f"duplicate key {value!r}")
            top.key, top.key_line = value, line
        elif top.key is _MERGE:
            sources = value if isinstance(value, list) else [value]
            if not sources or not all(isinstance(source, dict) for source in sources):
                self.fail(loc, top.key_line, "a merge key (<<) takes a mapping or a list of mappings")
            top.merges += [(source, top.key_line) for source in sources]
            top.key = _NONE
        else:
            top.value[top.key] = value
            self.lines[loc] = top.key_line
            top.key = _NONE

    def _merged(self, node: _Open) -> dict:
        """`<<: *base` (or a list of them): their keys, the first source winning, under the mapping's own."""
        result: dict = {}
        for source, line in node.merges:
            for key, value in source.items():
                if key not in result:
                    result[key] = value
                    if key not in node.value:
                        self.lines[(*node.loc, key)] = line
        result.update(node.value)
        return result

    def _scalar(self, event: yaml.ScalarEvent, loc: Location, is_key: bool, line: int) -> Any:
        text = event.value
        tag = event.tag
        if tag in (None, "!"):
            tag = _RESOLVER.resolve(yaml.ScalarNode, text, event.implicit)
        elif tag not in _EXPLICIT_SCALARS:
            self.fail(loc, line, f"tag {_short(tag)} is not allowed: only plain YAML values")
        kind = tag[len(_TAG) :]
        what = "a key" if is_key else "the value"
        if "\x00" in text:
            self.fail(loc, line, f"{what} contains a NUL character")
        surrogate = _SURROGATE.search(text)
        if surrogate:
            self.fail(loc, line, f"{what} contains a lone surrogate U+{ord(surrogate.group()):04X}")
        if kind == "merge":
            return _MERGE if is_key else text
        if kind == "null":
            return None
        if kind == "bool":
            value = SafeConstructor.bool_values.get(text.lower())
            if value is None:
                self.fail(loc, line, f"{text!r} is not a boolean")
            return value
        if kind in ("int", "float"):
            if len(text) > MAX_NUMBER_CHARS:
                self.fail(loc, line, f"a number of {len(text)} characters is too long (quote it if it is text)")
            node = yaml.ScalarNode(tag, text)
            try:
                return (
                    _CONSTRUCTOR.construct_yaml_int(node) if kind == "int" else _CONSTRUCTOR.construct_yaml_float(node)
                )
            except (ValueError, ArithmeticError, IndexError):  # `!!int _` is empty once `_` is dropped
                self.fail(loc, line, f"{text!r} is not a valid {kind}")
        return text  # str; timestamps and `=` stay text
