"""The output of a build step (pip install, docker build): all of it to a log file, indented on
the console, and its last lines kept to say why the step failed.

A log that cannot be written (a full disk) never stops the step halfway, which would leave its
process running unread: the console says once where the log ends and goes on showing the output;
when the step is over, a full disk is the step's error (DiskFullError, naming the log)."""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path

from runner.errors import DiskFullError
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import write_failure

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TAIL_LINES = 40


class Tee:
    def __init__(self, log_path: Path, logger: Logger, header: str, console: bool = True) -> None:
        self.log_path, self.logger, self.header, self.console = log_path, logger, header, console
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)  # the last non-blank lines, colours removed
        self.kept = f"all are in {log_path}"  # where the console's skipped lines are
        self.disk_full: str | None = None  # "disk full writing PATH", once the log could not be written
        self.file = None

    def __enter__(self) -> Tee:
        try:
            self.file = self.log_path.open("a", encoding="utf-8")
        except OSError as exc:
            self._failed(exc)
        self._write(self.header)
        return self

    def __exit__(self, kind, *exc_info) -> None:
        if self.file is not None:
            try:
                self.file.close()  # the buffer's last bytes: the disk may be full here first
            except OSError as exc:
                self.file = None
                self._failed(exc)
        if self.disk_full is not None and kind is None:
            raise DiskFullError(self.disk_full)

    def write(self, text: str) -> list[str]:
        """The log gets `text` as it came (secrets masked); returns its lines with the colours removed."""
        text = self.logger.masker.text(text)
        self._write(text)
        lines = ANSI.sub("", text).splitlines()
        self.tail.extend(line.rstrip() for line in lines if line.strip())
        if self.console:
            self.logger.log_chunk(b"".join(b"  " + line.encode() + b"\n" for line in lines), self.kept)
        return lines

    def _write(self, text: str) -> None:
        if self.file is None:
            return
        try:
            self.file.write(text)
        except OSError as exc:
            file, self.file = self.file, None
            try:
                file.close()
            except OSError:
                pass
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        """Said once; the step goes on, its output on the console only."""
        message, disk_full = write_failure(self.log_path, exc)
        if disk_full:
            self.disk_full = message
        self.kept = f"lost: {self.log_path} could not be written"
        self.logger.error(f"{message}; the step goes on, the rest of its output is on this console only")
