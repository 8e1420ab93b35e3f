"""Point at what failed: the last Python traceback in a rank's log, as file:line: message."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TAIL_BYTES = 256 << 10
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
SYNTAX = re.compile(r"^(?:SyntaxError|IndentationError|TabError): .*$", re.M)


@dataclass(frozen=True, slots=True)
class ScriptError:
    file: str  # relative to the source directory when the frame is the user's code
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


def tail_text(log: Path, size: int = TAIL_BYTES) -> str | None:
    """The last `size` bytes of a log as text (a log can be gigabytes), or None if unreadable."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - size))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def last_traceback(log: Path, workdir: Path) -> ScriptError | None:
    text = tail_text(log)
    if text is None:
        return None
    start = text.rfind("Traceback (most recent call last):")
    syntax = SYNTAX.search(text, max(start, 0))
    if syntax:  # a script that does not compile prints no "Traceback" header
        start = text.rfind("  File ", 0, syntax.start())
        start = text.rfind("\n", 0, start) + 1
    if start < 0:
        return None
    frames: list[tuple[str, int]] = []
    message = None
    for line in text[start:].splitlines():
        frame = FRAME.match(line)
        if frame:
            frames.append((frame["file"], int(frame["line"])))
        elif line and not line[0].isspace() and not line.startswith("Traceback"):
            message = line.strip()
            break
    if not frames or not message:
        return None
    file, line_no = _users_frame(frames, workdir.resolve())
    return ScriptError(file, line_no, message)


def _users_frame(frames: list[tuple[str, int]], workdir: Path) -> tuple[str, int]:
    for file, line in reversed(frames):
        path = Path(file)
        resolved = (workdir / path).resolve() if not path.is_absolute() else path.resolve()
        if resolved.is_relative_to(workdir):
            return resolved.relative_to(workdir).as_posix(), line
    return frames[-1]
