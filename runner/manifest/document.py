"""A YAML file as read: its plain values and the line of every key, and how a place in it is
named in an error (`FILE:LINE: field: message`). runner.manifest.loading reads the file,
runner.manifest.yamlfile parses it, runner.manifest.yamlcache keeps what was parsed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

Location = tuple[Any, ...]


class YamlDocument(NamedTuple):
    path: Path
    data: Any
    lines: dict[Location, int]
    empty: bool = False  # no document at all (an empty file, or only comments)

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


def format_loc(loc: Location) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            shown = str(part)
            if not shown or not shown.isprintable():
                shown = repr(part)
            text += ("." if text else "") + shown
    return text or "(top level)"


def one_line(text: str) -> str:
    """`text` with line breaks and other unprintable characters escaped: one problem, one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
