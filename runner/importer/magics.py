"""IPython's additions to Python in a notebook cell, read the way IPython reads them, so that the
rest of the cell parses as Python: a cell magic on a cell's first line (`%%writefile NAME`,
`%%bash`) owns the whole cell; a line magic (`%pip install X`) or a shell line (`!ls`), also as an
assignment (`files = !ls`), owns its line. What they say is kept as Magic records; where they
were, the joined code keeps its line numbers (blank lines, or `pass` where a block needs one).
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass

from runner.importer import budget
from runner.importer.budget import OverBudget

# cell magics whose body is Python run in the notebook's namespace: the body stays code
PYTHON_BODY = frozenset({"time", "timeit", "capture", "prun"})
LINE_MAGIC = re.compile(
    r"^(?P<indent>\s*)(?:[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*)?(?P<sign>%|!)(?P<rest>.*)$"
)
PIP_OPTIONS_WITH_VALUE = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
    }
)


class MagicKind(enum.Enum):
    CELL = "cell magic"  # %%name args, then the cell's body
    LINE = "line magic"  # %name args
    SHELL = "shell line"  # !command


@dataclass(frozen=True)
class Magic:
    kind: MagicKind
    name: str  # writefile, pip, bash; a shell line's command word
    args: str  # the rest of the magic's line
    line: int  # in the joined code (PythonSource.where names the cell)
    body: str = ""  # a cell magic's content

    @property
    def shown(self) -> str:
        sign = {MagicKind.CELL: "%%", MagicKind.LINE: "%", MagicKind.SHELL: "!"}[self.kind]
        text = f"{sign}{self.name} {self.args}".strip() if self.kind is not MagicKind.SHELL else f"!{self.args}".strip()
        return text if len(text) <= 80 else text[:79] + "…"

    def pip_installs(self) -> list[str] | None:
        """The packages of `%pip install …` / `!pip install …` / `!python -m pip install …`; None
        for anything else (or a line shlex cannot split)."""
        if self.kind is MagicKind.CELL:
            return None
        words = _words(self.args if self.kind is MagicKind.LINE else self.args.strip())
        if self.kind is MagicKind.SHELL:
            words = words[2:] if words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]) else words
            words = words[1:] if words[:1] in (["pip"], ["pip3"]) else None
        elif self.name not in ("pip", "pip3"):
            return None
        if not words or words[0] != "install":
            return None
        packages, skip = [], False
        for word in words[1:]:
            if skip:
                skip = False
            elif word.startswith("-"):
                skip = word in PIP_OPTIONS_WITH_VALUE
            else:
                packages.append(word)
        return packages


def _is_python(text: str) -> bool:
    try:
        budget.parse(text, "<cell>")
    except (SyntaxError, ValueError, OverBudget):
        return False
    return True


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return []


def split_cell(text: str, first_line: int) -> tuple[list[str], list[Magic]]:
    """A code cell as lines of Python (as many as it has) and the magics taken out of it;
    `first_line` is where the cell starts in the joined code."""
    lines = text.splitlines()
    start = next((index for index, line in enumerate(lines) if line.strip()), None)
    if start is not None and lines[start].lstrip().startswith("%%"):
        name, _, args = lines[start].lstrip()[2:].partition(" ")
        body = "\n".join(lines[start + 1 :]) + ("\n" if len(lines) > start + 1 else "")
        magic = Magic(MagicKind.CELL, name.strip(), args.strip(), first_line + start, body)
        if magic.name not in PYTHON_BODY:
            return [""] * len(lines), [magic]
        lines[start] = ""
        return _line_magics(lines, first_line, [magic])
    return _line_magics(lines, first_line, [])


def _line_magics(lines: list[str], first_line: int, magics: list[Magic]) -> tuple[list[str], list[Magic]]:
    """Line magics and shell lines, where a statement may start (IPython's rule: not inside
    brackets, a string or a continued line, where `% 2` is Python)."""
    if not any(LINE_MAGIC.match(line) for line in lines) or _is_python("\n".join(lines)):
        return lines, magics
    code, scanner = [], _Scanner()
    for index, line in enumerate(lines):
        match = LINE_MAGIC.match(line) if scanner.at_start() else None
        if not match:
            scanner.feed(line)
            code.append(line)
            continue
        rest = match["rest"]
        if match["sign"] == "!":
            magics.append(Magic(MagicKind.SHELL, (_words(rest) or [""])[0], rest.strip(), first_line + index))
        else:
            name, _, args = rest.partition(" ")
            magics.append(Magic(MagicKind.LINE, name.strip(), args.strip(), first_line + index))
        code.append(f"{match['indent']}pass")  # a magic may be the only line of an `if` block
    return code, magics


class _Scanner:
    """Just enough of Python's tokenizer, one line at a time (linear): open brackets, an open
    string, a line continued by a backslash."""

    def __init__(self) -> None:
        self.depth, self.quote, self.continued = 0, "", False

    def at_start(self) -> bool:
        return self.depth == 0 and not self.quote and not self.continued

    def feed(self, line: str) -> None:
        index, size = 0, len(line)
        while index < size:
            char = line[index]
            if self.quote:
                if char == "\\":
                    index += 2
                    continue
                if line.startswith(self.quote, index):
                    index, self.quote = index + len(self.quote), ""
                    continue
            elif char == "#":
                break
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char in "'\"":
                self.quote = line[index : index + 3] if line[index : index + 3] in ('"""', "'''") else char
                index += len(self.quote)
                continue
            index += 1
        if len(self.quote) == 1:
            self.quote = ""  # an unterminated one-line string ends with its line (Python refuses it)
        self.continued = not self.quote and line.rstrip().endswith("\\") and "#" not in line
