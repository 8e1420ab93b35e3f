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


@dataclass(frozen=True)
class PythonSource:
    path: Path
    label: str  # the path as reports show it
    text: str
    cell_starts: tuple[int, ...] = ()  # notebooks: the joined line where each code cell begins
    cell_numbers: tuple[int, ...] = ()  # notebooks: that cell's number among all cells, from 1

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
        try:
            return ast.parse(self.text, filename=str(self.path))
        except SyntaxError as exc:
            raise ManifestError(f"{self.where(exc.lineno)}: invalid Python: {exc.msg}") from None


def read_python(path: Path, label: str) -> PythonSource:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{label}: cannot read: {exc}") from None
    if path.suffix != ".ipynb":
        return PythonSource(path, label, raw)
    try:
        notebook = json.loads(raw)
        cells = notebook["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(f"{label}: not a Jupyter notebook (nbformat 4 JSON): {exc}") from None
    lines: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        starts.append(len(lines) + 1)
        numbers.append(number)
        # IPython magics and shell escapes are no Python: blank them, keeping the line numbers.
        lines += ["" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()]
        lines.append("")
    return PythonSource(path, label, "\n".join(lines) + "\n", tuple(starts), tuple(numbers))
