"""Python source of an Azure ML job: a `.py` file or the code cells of an `.ipynb` notebook.

Only read and parsed (`ast`), never executed or imported.
"""

from __future__ import annotations

import ast
import bisect
import json
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ManifestError
from runner.importer import budget
from runner.importer.budget import OverBudget
from runner.importer.magics import Magic, split_cell


@dataclass(frozen=True)
class PythonSource:
    path: Path
    label: str  # the path as reports show it
    text: str
    cell_starts: tuple[int, ...] = ()  # notebooks: the joined line where each code cell begins
    cell_numbers: tuple[int, ...] = ()  # notebooks: that cell's number among all cells, from 1
    magics: tuple[Magic, ...] = ()  # notebooks: IPython's magics and shell lines, taken out of the code
    over: bool = False  # notebooks: more code than the budget, read no further

    def where(self, line: int | None) -> str:
        if not line:
            return self.label
        if not self.cell_starts:
            return f"{self.label}:{line}"
        index = bisect.bisect_right(self.cell_starts, line) - 1
        return f"{self.label}:cell {self.cell_numbers[index]}:{line - self.cell_starts[index] + 1}"

    def segment(self, node: ast.AST, limit: int = 120) -> str:
        text = ast.get_source_segment(self.text, node) or ast.unparse(node)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def parse(self) -> ast.Module:
        """The syntax tree, its nesting bounded (budget.parse); every failure is one line naming FILE:LINE."""
        try:
            return budget.parse(self.text, str(self.path))
        except SyntaxError as exc:
            raise ManifestError(f"{self.where(exc.lineno)}: invalid Python: {exc.msg}") from None
        except OverBudget as exc:
            raise ManifestError(f"{self.where(exc.line)}: {exc.message()}") from None


def read_python(path: Path, label: str) -> PythonSource:
    """A script's text, or a notebook's code cells joined; both held to budget's size limits
    before anything parses them."""
    notebook = path.suffix == ".ipynb"
    raw = _read_text(path, label, budget.MAX_NOTEBOOK_BYTES if notebook else budget.MAX_SOURCE_BYTES)
    source = _notebook(path, label, raw) if notebook else PythonSource(path, label, raw)
    _check_size(source)
    return source


def _read_text(path: Path, label: str, limit: int) -> str:
    """At most `limit` bytes are read: a larger file (or an endless one) is refused, not loaded."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ManifestError(f"{label}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ManifestError(f"{label}: larger than {limit >> 10} KiB: {budget.WHY}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{label}: cannot read: not UTF-8 text (byte {exc.start})") from None


def _check_size(source: PythonSource) -> None:
    if source.over or len(source.text) > budget.MAX_SOURCE_BYTES:
        raise ManifestError(f"{source.label}: more than {budget.MAX_SOURCE_BYTES >> 10} KiB of code: {budget.WHY}")
    lines = source.text.count("\n")
    if lines > budget.MAX_LINES:
        where = source.where(budget.MAX_LINES + 1)
        raise ManifestError(f"{where}: more than {budget.MAX_LINES:,} lines: {budget.WHY}")


def _notebook(path: Path, label: str, raw: str) -> PythonSource:
    """The code cells of an nbformat 4 notebook, joined; each cell's magics as cellmagic reads them."""
    try:
        notebook = json.loads(raw)
    except RecursionError:
        raise ManifestError(f"{label}: not a Jupyter notebook: its JSON is nested too deeply") from None
    except ValueError as exc:
        raise ManifestError(f"{label}: not a Jupyter notebook (nbformat 4 JSON): {exc}") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise ManifestError(f"{label}: not a Jupyter notebook (nbformat 4 JSON): no list of 'cells'")
    lines: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    magics: list[Magic] = []
    size = 0  # characters of code, cell magics' bodies included
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ManifestError(
                f"{label}:cell {number}: 'source' must be text or a list of lines, not {type(source).__name__}"
            )
        size += len(source)
        if size > budget.MAX_SOURCE_BYTES or len(lines) > budget.MAX_LINES:
            break  # _check_size names what
        starts.append(len(lines) + 1)
        numbers.append(number)
        code, found = split_cell(source, len(lines) + 1)  # IPython's magics, read out of the Python
        lines += code
        lines.append("")
        magics += found
    text = "\n".join(lines) + "\n"
    return PythonSource(
        path, label, text, tuple(starts), tuple(numbers), tuple(magics), over=size > budget.MAX_SOURCE_BYTES
    )
