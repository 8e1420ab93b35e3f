"""Drains every training process's output: to `logs/<rank>.log`, the console and the parsers.

One thread per stream reads big chunks as they come (the training process never waits on a
full pipe, since the disk write is the only thing in the way), writes the whole lines to the
rank's log file (secret values masked as ***) and hands them on. Memory is bounded: a line longer than MAX_LINE is
cut, and the console queue has a byte budget (see logger.Logger).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

from runner.logger import Logger

READ_SIZE = 1 << 16
MAX_LINE = 1 << 20
PROGRESS = re.compile(rb"[^\n]*\r(?!\n)")

LineSink = Callable[[bytes], None]


class LogPump:
    def __init__(self, logger: Logger, logs_dir: Path, prefix_ranks: bool, secrets: tuple[str, ...] = ()) -> None:
        self.logger = logger
        self.logs_dir = logs_dir
        self.prefix_ranks = prefix_ranks
        self.secrets = tuple(secret.encode() for secret in secrets if secret)
        self.threads: list[threading.Thread] = []

    def log_path(self, rank: int) -> Path:
        return self.logs_dir / f"{rank}.log"

    def add(self, rank: int, fd: int, sink: LineSink | None = None) -> None:
        """Start draining `fd` (a pipe's read end, owned by the pump from now on)."""
        thread = threading.Thread(target=self._drain, args=(rank, fd, sink), name=f"log-{rank}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join()

    def _drain(self, rank: int, fd: int, sink: LineSink | None) -> None:
        path = self.log_path(rank)
        name = str(path)
        prefix = f"[{rank}] ".encode() if self.prefix_ranks else b""
        pending = b""
        with path.open("ab", buffering=0) as log:
            while True:
                try:
                    data = os.read(fd, READ_SIZE)
                except InterruptedError:
                    continue
                if not data:
                    break
                data = pending + data if pending else data
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data if len(data) < MAX_LINE else b""
                    if pending:
                        continue
                    lines = data + b"\n"
                else:
                    lines, pending = data[: cut + 1], data[cut + 1 :]
                self._hand_on(lines, log, prefix, name, sink)
            if pending:
                self._hand_on(pending + b"\n", log, prefix, name, sink)
        os.close(fd)

    def _mask(self, lines: bytes) -> bytes:
        for secret in self.secrets:
            lines = lines.replace(secret, b"***")
        return lines

    def _hand_on(self, lines: bytes, log, prefix: bytes, name: str, sink: LineSink | None) -> None:
        if self.secrets:
            lines = self._mask(lines)
        log.write(lines)
        shown = PROGRESS.sub(b"", lines) if b"\r" in lines else lines
        if prefix:
            shown = prefix + shown[:-1].replace(b"\n", b"\n" + prefix) + b"\n"
        self.logger.log_chunk(shown, name)
        if sink is not None:
            sink(lines)  # after the lines, so a metric never shows before the line it came from
