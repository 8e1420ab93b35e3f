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
        self._start(self._drain, (fd, _Stream(self, rank, label, sink)), f"log-{rank}")

    def add_tagged(self, fd: int, ranks: dict[int, LineSink | None], other: str) -> None:
        """Drain the output of `mpirun --tag-output`: `[job,rank]<stdout>:` lines go to that rank's
        log; the launcher's own lines to `<other>.log`."""
        streams = {rank: _Stream(self, rank, None, sink) for rank, sink in ranks.items()}
        streams[-1] = _Stream(self, other, other, None)
        self._start(self._drain_tagged, (fd, streams), "log-mpirun")

    def _start(self, target, args, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join()

    def _drain(self, fd: int, stream: _Stream) -> None:
        pending = b""
        try:
            for data in _chunks(fd):
                data = pending + data if pending else data
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data if len(data) < MAX_LINE else b""
                    if pending:
                        continue
                    lines = data + b"\n"
                else:
                    lines, pending = data[: cut + 1], data[cut + 1 :]
                stream.take(lines)
            if pending:
                stream.take(pending + b"\n")
        finally:
            os.close(fd)
            stream.close()

    def _drain_tagged(self, fd: int, streams: dict) -> None:
        demux = TagDemux(streams)
        try:
            for data in _chunks(fd):
                demux.feed(data)
            demux.close()
        finally:
            os.close(fd)
            for stream in streams.values():
                stream.close()

    def _mask(self, lines: bytes) -> bytes:
        for secret in self.secrets:
            lines = lines.replace(secret, b"***")
        return lines


def _chunks(fd: int):
    """What arrives on `fd`, as it arrives, until end of file."""
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except InterruptedError:
            continue
        if not data:
            return
        yield data


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


TAG = re.compile(rb"\[\d+,(\d+)\]<std(?:out|err)>:")
TAG_START = re.compile(rb"\[[\d,]*\]?<?s?t?d?(?:o?u?t?|e?r?r?)>?$")  # a tag cut off by the end of a read


class TagDemux:
    """Splits `mpirun --tag-output` output by rank. Open MPI tags every fragment a rank writes,
    and a fragment need not end a line (Python writes a line's text and its newline apart), so a
    tag can stand in the middle of a line: fragments are joined per rank, then cut into lines.
    Untagged data continues the rank of the fragment before it (a read can end mid-fragment);
    before any tag it is mpirun's own."""

    def __init__(self, streams: dict) -> None:
        self.streams = streams
        self.rank = -1
        self.pending: dict[int, bytes] = {}
        self.carry = b""

    def feed(self, data: bytes) -> None:
        data = self.carry + data
        self.carry = b""
        cut = data.rfind(b"[")
        if cut >= 0 and TAG.match(data, cut) is None and TAG_START.match(data, cut):
            data, self.carry = data[:cut], data[cut:]
        position = 0
        for match in TAG.finditer(data):
            self._add(self.rank, data[position : match.start()])
            self.rank, position = int(match[1]), match.end()
        self._add(self.rank, data[position:])

    def _add(self, rank: int, fragment: bytes) -> None:
        if not fragment:
            return
        text = self.pending.pop(rank, b"") + fragment
        cut = text.rfind(b"\n")
        if cut >= 0:
            self._stream(rank).take(text[: cut + 1])
        rest = text[cut + 1 :]
        if len(rest) >= MAX_LINE:
            self._stream(rank).take(rest + b"\n")
        elif rest:
            self.pending[rank] = rest

    def _stream(self, rank: int):
        return self.streams.get(rank) or self.streams[-1]

    def close(self) -> None:
        if self.carry:
            self._add(self.rank, self.carry)
        for rank, rest in self.pending.items():
            self._stream(rank).take(rest + b"\n")
        self.pending.clear()
