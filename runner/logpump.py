"""Drains every training process's output: to `logs/<rank>.log`, the console and the parsers.

One thread per stream reads big chunks as they come (the training process never waits on a
full pipe, since the disk write is the only thing in the way), writes the whole lines to the
rank's log file (secret values masked as ***) and hands them on. Memory is bounded: a line
longer than MAX_LINE is cut, and the console queue has a byte budget (see logger.Logger).
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

    def add(self, rank: int, fd: int, sink: LineSink | None = None, label: str | None = None) -> None:
        """Start draining `fd` (a pipe's read end, owned by the pump from now on) into rank's log."""
        self._start(self._drain, (fd, {rank: _Stream(self, rank, label, sink)}, None), f"log-{rank}")

    def add_tagged(self, fd: int, ranks: dict[int, LineSink | None], other: str) -> None:
        """Drain the output of `mpirun --tag-output`: `[job,rank]<stdout>:` lines go to that rank's
        log; the launcher's own lines to `<other>.log`."""
        streams = {rank: _Stream(self, rank, None, sink) for rank, sink in ranks.items()}
        streams[-1] = _Stream(self, other, other, None)
        self._start(self._drain, (fd, streams, _split_tagged), "log-mpirun")

    def _start(self, target, args, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join()

    def _drain(self, fd: int, streams: dict, split) -> None:
        pending = b""
        try:
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
                self._route(lines, streams, split)
            if pending:
                self._route(pending + b"\n", streams, split)
        finally:
            os.close(fd)
            for stream in streams.values():
                stream.close()

    def _route(self, lines: bytes, streams: dict, split) -> None:
        if split is None:
            next(iter(streams.values())).take(lines)
            return
        for rank, chunk in split(lines):
            (streams.get(rank) or streams[-1]).take(chunk)

    def _mask(self, lines: bytes) -> bytes:
        for secret in self.secrets:
            lines = lines.replace(secret, b"***")
        return lines


class _Stream:
    """One rank's (or the launcher's) log: its file, console prefix and parser."""

    def __init__(self, pump: LogPump, rank, label: str | None, sink: LineSink | None) -> None:
        self.pump = pump
        self.path = pump.logs_dir / f"{rank}.log"
        self.log = self.path.open("ab", buffering=0)
        shown = label if label is not None else str(rank)
        self.prefix = f"[{shown}] ".encode() if pump.prefix_ranks else b""
        self.sink = sink

    def take(self, lines: bytes) -> None:
        if self.pump.secrets:
            lines = self.pump._mask(lines)
        self.log.write(lines)
        shown = PROGRESS.sub(b"", lines) if b"\r" in lines else lines
        if self.prefix:
            shown = self.prefix + shown[:-1].replace(b"\n", b"\n" + self.prefix) + b"\n"
        self.pump.logger.log_chunk(shown, str(self.path))
        if self.sink is not None:
            self.sink(lines)  # after the lines, so a metric never shows before the line it came from

    def close(self) -> None:
        self.log.close()


TAG = re.compile(rb"^\[\d+,(\d+)\]<std(?:out|err)>:", re.M)


def _split_tagged(lines: bytes):
    """(rank, lines) runs of `mpirun --tag-output` output, tags removed; rank -1 for untagged lines."""
    runs: list[tuple[int, list[bytes]]] = []
    for line in lines.splitlines(keepends=True):
        match = TAG.match(line)
        rank, text = (int(match[1]), line[match.end() :]) if match else (-1, line)
        if runs and runs[-1][0] == rank:
            runs[-1][1].append(text)
        else:
            runs.append((rank, [text]))
    return [(rank, b"".join(texts)) for rank, texts in runs]
