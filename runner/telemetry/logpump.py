"""Drains every training process's output: to `logs/<rank>.log`, the console and the parsers.

One thread per stream reads big chunks as they come (the training process never waits on a
full pipe, since the disk write is the only thing in the way), writes the whole lines to the
rank's log file (secret values masked as ***, through the logger's Masker) and hands them on.
Memory is bounded: a line longer than MAX_LINE is cut (keeping back enough of its end to mask a
secret that straddles the cut), and the console queue has a byte budget (see logger.Logger).

A pump thread never dies while the process writes: when the disk is full it stops writing that
log, says once where the log ends, and keeps draining the pipe (the training must not block on
it); from then on the console's notice of lines it skipped says they are lost, never that they are
in the log. `disk_full` tells the run to end Failed, and `first_disk_full` names the file that
failed first (a log, metrics.jsonl), not a record written later for want of the same space.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.errors import DiskFullError
from runner.telemetry.logger import Logger
from runner.telemetry.masking import Masker

READ_SIZE = 1 << 16
MAX_LINE = 1 << 20
PROGRESS = re.compile(rb"[^\n]*\r(?!\n)")
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

LineSink = Callable[[bytes], None]


class LogPump:
    def __init__(self, logger: Logger, logs_dir: Path, prefix_ranks: bool, secrets: tuple[str, ...] = ()) -> None:
        self.logger = logger
        self.logs_dir = logs_dir
        self.prefix_ranks = prefix_ranks
        for secret in secrets:  # known to the logger already when they came from the manifest
            logger.mask(secret)
        self.masker: Masker = logger.masker
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.disk_full: Path | None = None  # the first log that could not be written: no space left
        self.failure: str | None = None  # what ends the run Failed: "disk full writing PATH", …
        self.failed_at: float | None = None  # when (time.monotonic()) `disk_full` failed

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
                    if len(data) < MAX_LINE:
                        pending = data
                        continue
                    lines, pending = cut_long_line(data, self.masker)
                else:
                    lines, pending = data[: cut + 1], data[cut + 1 :]
                stream.take(lines)
            if pending:
                stream.take(pending + b"\n")
        finally:
            os.close(fd)
            stream.close()

    def _drain_tagged(self, fd: int, streams: dict) -> None:
        demux = TagDemux(streams, self.masker)
        try:
            for data in _chunks(fd):
                demux.feed(data)
            demux.close()
        finally:
            os.close(fd)
            for stream in streams.values():
                stream.close()

    def failed_writing(self, path: Path, exc: OSError, lines: int) -> str:
        """A log could not be written past `lines` lines: said once per log, the first failure kept
        for the run. Returns where the log ends, for the console's notices from here on."""
        message, disk_full = write_failure(path, exc)
        with self.lock:
            if self.failure is None:
                self.failure = message
            if disk_full and self.disk_full is None:
                self.disk_full, self.failed_at = path, time.monotonic()
        ends = f"ends at line {lines}" if lines else "holds no line"
        self.logger.error(
            f"{message} (the log {ends}); the training goes on, the rest of its output is on this console only"
        )
        return f"{path} {ends}" + (" (disk full)" if disk_full else "")


def write_failure(path: Path, exc: OSError) -> tuple[str, bool]:
    """What a failed write says (one line), and whether the disk (or quota) is full."""
    disk_full = exc.errno in DISK_FULL
    return (_full(path) if disk_full else f"could not write {path}: {exc.strerror or exc}"), disk_full


def _full(path: Path) -> str:
    return f"disk full writing {path}"


def first_disk_full(sinks, ending: str, before: float | None = None) -> DiskFullError | None:
    """The run's error for the file that ran out of space first among `sinks` (a LogPump, a
    MetricsRecorder: `disk_full`, `failed_at`), counting only failures before `before`
    (the moment a later write raised); None when none did. `ending`: how the training ended."""
    failed = [sink for sink in sinks if sink.disk_full is not None and (before is None or sink.failed_at <= before)]
    if not failed:
        return None
    first = min(failed, key=lambda sink: sink.failed_at)
    return DiskFullError(
        f"{_full(first.disk_full)} (the training {ending}; logs and outputs are kept as far as they went)"
    )


def cut_long_line(line: bytes, masker: Masker) -> tuple[bytes, bytes]:
    """A line too long to hold: what goes out now (as a line of its own), and what stays to be
    continued (enough of its end that a secret straddling the cut is still masked whole)."""
    end = masker.safe_end(line) or len(line)
    return line[:end] + b"\n", line[end:]


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
        self.kept = f"all are in {self.path}"  # where the console's skipped lines are
        self.lines = 0  # whole lines in the log
        self.log = None
        try:
            self.log = self.path.open("ab", buffering=0)
        except OSError as exc:
            self.kept = "lost: " + pump.failed_writing(self.path, exc, 0)
        shown = label if label is not None else str(rank)
        self.prefix = f"[{shown}] ".encode() if pump.prefix_ranks else b""
        self.sink = sink

    def take(self, lines: bytes) -> None:
        lines = self.pump.masker.chunk(lines)
        if self.log is not None:
            self._write(lines)
        shown = PROGRESS.sub(b"", lines) if b"\r" in lines else lines
        if self.prefix:
            shown = self.prefix + shown[:-1].replace(b"\n", b"\n" + self.prefix) + b"\n"
        self.pump.logger.log_chunk(shown, self.kept)
        if self.sink is not None:
            self._feed(lines)  # after the lines, so a metric never shows before the line it came from

    def _write(self, lines: bytes) -> None:
        done = 0
        try:
            view = memoryview(lines)
            while done < len(lines):  # a write may be short when the disk fills up
                done += self.log.write(view[done:])
            self.lines += lines.count(b"\n")
        except OSError as exc:
            self.close()
            self.kept = "lost: " + self.pump.failed_writing(self.path, exc, self.lines + lines.count(b"\n", 0, done))

    def _feed(self, lines: bytes) -> None:
        try:
            self.sink(lines)
        except Exception as exc:  # noqa: BLE001 - a broken parser loses the metrics, never the log
            self.sink = None
            self.pump.logger.error(f"metrics from {self.path} stopped: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self.log is not None:
            log, self.log = self.log, None
            try:
                log.close()
            except OSError:
                pass


TAG = re.compile(rb"\[\d+,(\d+)\]<std(?:out|err)>:")
TAG_START = re.compile(rb"\[[\d,]*\]?<?s?t?d?(?:o?u?t?|e?r?r?)>?$")  # a tag cut off by the end of a read


class TagDemux:
    """Splits `mpirun --tag-output` output by rank. Open MPI tags every fragment a rank writes,
    and a fragment need not end a line (Python writes a line's text and its newline apart), so a
    tag can stand in the middle of a line: fragments are joined per rank, then cut into lines.
    Untagged data continues the rank of the fragment before it (a read can end mid-fragment);
    before any tag it is mpirun's own."""

    def __init__(self, streams: dict, masker: Masker | None = None) -> None:
        self.streams = streams
        self.masker = masker or Masker()
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
            head, rest = cut_long_line(rest, self.masker)
            self._stream(rank).take(head)
        if rest:
            self.pending[rank] = rest

    def _stream(self, rank: int):
        return self.streams.get(rank) or self.streams[-1]

    def close(self) -> None:
        if self.carry:
            self._add(self.rank, self.carry)
        for rank, rest in self.pending.items():
            self._stream(rank).take(rest + b"\n")
        self.pending.clear()
