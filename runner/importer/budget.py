"""What the static reading of a script may spend: the importer never runs the file, but it does
evaluate its literals (`"a" * 3`, `f"{x:>10}"`, `[L, L]`), so a hostile file could make that
evaluation hang or fill memory. Every limit lives here and is enforced in one place each:

- the text (bytes and lines) before it is parsed: source.read_python;
- the syntax tree's nesting before it is walked: interp.read_script (recursive walkers — our
  evaluator, `ast.unparse` — stay far from Python's recursion limit);
- every value the evaluator builds, and every step it takes (a deterministic clock, with a wall
  clock behind it): Budget, owned by the Interpreter.

Going over any of them stops the import with one line naming FILE:LINE (a ManifestError).
"""

from __future__ import annotations

import ast
import io
import re
import time
import tokenize
from typing import Any

MAX_SOURCE_BYTES = (
    512 << 10
)  # a script (or a notebook's code, joined): Azure's own are 5–40 kB; parsing 512 kB takes ~1 s
MAX_NOTEBOOK_BYTES = 64 << 20  # a notebook file, its outputs (images) included
MAX_LINES = 20_000
MAX_DEPTH = 100  # syntax nesting; Azure ML scripts stay under 20
MAX_VALUE = 100_000  # items and characters in one value (a list of strings counts both)
MAX_VALUE_DEPTH = 50  # lists in lists in dicts …
MAX_INT_BITS = 4096  # ~1,200 digits: every int can still be written (Python refuses str() past 4,300)
MAX_WIDTH = 10_000  # a format width or precision (`f"{x:>N}"`, `"%Nd" % x`)
MAX_STEPS = 1_000_000  # evaluated expressions + value cells measured: a second or two here
MAX_SECONDS = 10.0  # the wall clock behind the steps (a loaded machine)
WHY = "the importer reads the file, never runs it, and reads no further"

# a printf-style conversion: %(key)flags width .precision length type
PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([a-zA-Z%])")


class OverBudget(Exception):
    """The file asks more of the static reading than any job script does; `line` is where."""

    def __init__(self, what: str, line: int | None) -> None:
        super().__init__(what)
        self.what, self.line = what, line

    def message(self) -> str:
        return f"{self.what}: {WHY}"


class Budget:
    """The steps taken and the deadline of one file's reading; the yardstick for its values."""

    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def spend(self, count: int, line: int | None) -> None:
        """Every evaluation and every measured cell costs a step: a file cannot keep the reading busy."""
        before, self.steps = self.steps, self.steps + count
        if self.steps > MAX_STEPS:
            raise OverBudget(f"more than {MAX_STEPS:,} evaluation steps", line)
        if before >> 12 != self.steps >> 12 and time.monotonic() > self.deadline:
            raise OverBudget(f"reading took more than {MAX_SECONDS:g} s", line)

    def admit(self, value: Any, line: int | None) -> Any:
        """`value`, once it is known to be small: its cells (items + characters + digits, shared
        parts counted each time they appear, as str() or a reader would see them), its nesting."""
        cells, stack = 0, [(value, 1)]
        while stack:
            item, depth = stack.pop()
            cells += 1
            if depth > MAX_VALUE_DEPTH:
                raise OverBudget(f"a value nested more than {MAX_VALUE_DEPTH} deep", line)
            if isinstance(item, (str, bytes)):
                cells += len(item)
            elif isinstance(item, int):
                check_int_bits(item.bit_length(), line)
                cells += item.bit_length() // 3  # its digits, as str() and the manifest would write them
            elif isinstance(item, list):
                stack.extend((element, depth + 1) for element in item)
            elif isinstance(item, dict):
                stack.extend((element, depth + 1) for pair in item.items() for element in pair)
            if cells > MAX_VALUE:
                self.spend(cells, line)
                raise OverBudget(f"a value of more than {MAX_VALUE:,} items and characters", line)
        self.spend(cells, line)
        return value


def check_int_bits(bits: int, line: int | None) -> None:
    """An int of `bits` is refused before it is computed (a product's bits are known beforehand)."""
    if bits > MAX_INT_BITS:
        raise OverBudget(f"an integer of more than {MAX_INT_BITS} bits", line)


def check_format_spec(spec: str, line: int | None) -> None:
    """`f"{x:>N}"` / `format(x, ".Nf")`: the digits of a spec are its width and precision."""
    for digits in re.findall(r"\d+", spec):
        if len(digits) > 6 or int(digits) > MAX_WIDTH:
            raise OverBudget(f"a format width of {digits[:24]}{'…' if len(digits) > 24 else ''} characters", line)


def printf_computable(text: str | bytes, line: int | None) -> bool:
    """`TEXT % args`: refused when a width or precision is huge; not computed (False) when one
    comes from the arguments (`%*d`), which the reading does not follow."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    for match in PRINTF.finditer(text):
        for number in match.group(1, 2):
            if number == "*":
                return False
            if number and (len(number) > 6 or int(number) > MAX_WIDTH):
                raise OverBudget(f"a format width of {number[:24]}{'…' if len(number) > 24 else ''} characters", line)
    return True


def parse(text: str, filename: str) -> ast.Module:
    """`ast.parse`, its nesting bounded. CPython's parser stops deep nesting itself, cheaply (in a
    fraction of a second, at ~3,000 levels: RecursionError; a long run of unary operators:
    MemoryError, its parser stack's limit, not memory spent); the tree it returns is then held to
    MAX_DEPTH, which is what our recursive walkers can take. SyntaxError is the caller's."""
    try:
        tree = ast.parse(text, filename=filename)
    except (RecursionError, MemoryError):
        raise OverBudget(
            f"an expression nested too deeply (more than {MAX_DEPTH} levels)", busiest_line(text)
        ) from None
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise OverBudget(f"an expression nested more than {MAX_DEPTH} levels deep", getattr(node, "lineno", None))
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def busiest_line(text: str) -> int | None:
    """Where the parser gave up: the start of the logical line with the most tokens."""
    best, count, start, most = None, 0, None, 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if start is None:
                start = token.start[0]
            count += 1
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if count > most:
                    best, most = start, count
                count, start = 0, None
    except (tokenize.TokenError, SyntaxError):
        pass
    return best
