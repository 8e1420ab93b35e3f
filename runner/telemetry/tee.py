"""The output of a build step (pip install, docker build): all of it to a log file, indented on
the console, and its last lines kept to say why the step failed."""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

from runner.telemetry.logger import Logger

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TAIL_LINES = 40


class Tee:
    def __init__(self, log_path: Path, logger: Logger, header: str, console: bool = True) -> None:
        self.log_path, self.logger, self.header, self.console = log_path, logger, header, console
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)  # the last non-blank lines, colours removed

    def __enter__(self) -> Tee:
        self.file = self.log_path.open("a", encoding="utf-8")
        self.file.write(self.header)
        self.file.flush()
        return self

    def __exit__(self, *exc_info) -> None:
        self.file.close()

    def write(self, text: str) -> list[str]:
        """The log gets `text` as it came (secrets masked); returns its lines with the colours removed."""
        text = self.logger.masker.text(text)
        self.file.write(text)
        lines = ANSI.sub("", text).splitlines()
        self.tail.extend(line.rstrip() for line in lines if line.strip())
        if self.console:
            self.logger.log_chunk(b"".join(b"  " + line.encode() + b"\n" for line in lines), str(self.log_path))
        return lines
