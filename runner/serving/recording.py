"""`tftrain serve --record DIR`: the requests a served model answered (200), written as a replay's
request file (runner.serving.records: route, JSON body, status, answer, latency, time; never a header,
the key or a query string) into DIR/requests-NNNNNN.jsonl — sampled, rotated, and never more than
the cap on disk: the oldest file goes first.

A request is never slowed or failed by its recording: the server hands each one to a queue (a full
queue drops it, counted) and one thread writes. Only inside DIR: the directory is opened once
(O_NOFOLLOW: not a link) and every file is made relative to it, new (O_EXCL), never through a link.
A write that fails (a full disk, a read-only or vanished directory) stops the recording, said once;
the server keeps answering. Standard library only: the model server imports it.
"""

from __future__ import annotations

import errno
import os
import queue
import random
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from runner.serving.records import MAX_LINE_BYTES, MAX_REQUESTS, RECORD_FILE, Route

FILES_PER_CAP = 4  # the cap is kept by rotating through about this many files
LINES_PER_FILE = MAX_REQUESTS // FILES_PER_CAP  # a directory never holds more requests than a replay reads
MIN_FILE_BYTES = 64 << 10
QUEUE_SIZE = 10_000
FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NUMBER = re.compile(r"requests-([0-9]{6})\.jsonl")


def open_directory(directory: Path) -> int:
    """DIR opened for recording (made when missing); ValueError (one line) for a link, a file, or a
    directory this process cannot write."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileExistsError:
        raise ValueError(f"--record {directory}: not a directory") from None
    except OSError as exc:
        why = (
            "a link (give the directory itself)"
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and directory.is_symlink()
            else exc.strerror
        )
        raise ValueError(f"--record {directory}: {why}") from None
    if not os.access(f"/proc/self/fd/{fd}", os.W_OK):
        os.close(fd)
        raise ValueError(f"--record {directory}: not writable")
    return fd


class Recorder:
    """Records handed over by `record`, written by one thread; `close` writes what is queued."""

    def __init__(self, directory: Path, sample: float, max_bytes: int, say: Callable[[str], None]) -> None:
        if not 0 < sample <= 1:
            raise ValueError(f"--record-sample {sample:g}: a share in (0, 1]")
        if max_bytes < MIN_FILE_BYTES:
            raise ValueError(f"--record-max-mb: at least {MIN_FILE_BYTES >> 10} KiB")
        self.directory, self.sample, self.max_bytes, self.say = directory, sample, max_bytes, say
        self.file_bytes = max(MIN_FILE_BYTES, max_bytes // FILES_PER_CAP)
        self.fd = open_directory(directory)
        self.files: list[tuple[str, int]] = self._existing()  # (name, bytes), oldest first
        self.current: int | None = None
        self.lines = 0  # in the current file
        self.queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self.dropped = self.skipped = self.written = self.counter = 0
        self.prefix = uuid.uuid4().hex[:8].encode()  # ids unique across restarts: rec-PREFIX-N
        self._second, self._stamp = -1, b""
        self.stopped = False
        self.thread = threading.Thread(target=self._write_all, name="tftrain-record", daemon=True)
        self.thread.start()

    def _existing(self) -> list[tuple[str, int]]:
        found = []
        for name in sorted(os.listdir(self.fd)):
            if RECORD_FILE.fullmatch(name):
                info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    found.append((name, info.st_size))
        return found

    def record(self, route: Route, body: bytes, status: int, answer: bytes, seconds: float) -> None:
        """One answered request (called on the server's own thread: cheap, never raises)."""
        if self.stopped or status != 200 or (self.sample < 1 and random.random() >= self.sample):
            return
        try:
            self.queue.put_nowait((route, body, answer, seconds, time.time()))
        except queue.Full:
            self.dropped += 1

    def close(self, seconds: float = 10.0) -> None:
        """Write what is queued (for `seconds` at most), close the files and say what was kept."""
        self.queue.put(None)
        self.thread.join(seconds)
        if self.current is not None:
            os.close(self.current)
            self.current = None
        os.close(self.fd)
        self.say(self.summary())

    def summary(self) -> str:
        left = [
            f"{count:,} {why}"
            for count, why in (
                (self.skipped, "not kept (not JSON, or a line too large to replay)"),
                (self.dropped, "dropped (the writer fell behind)"),
            )
            if count
        ]
        return f"tftrain-serve: recorded {self.written:,} requests in {self.directory}" + (
            f"; {', '.join(left)}" if left else ""
        )

    def _write_all(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.stopped:
                continue
            line = self._line(*item)
            if line is None:
                self.skipped += 1
                continue
            try:
                self._write(line)
                self.written += 1
            except OSError as exc:
                self.stopped = True
                self.say(
                    f"tftrain-serve: recording stopped: {exc.strerror or exc} ({self.directory}); the server keeps"
                    " answering"
                )

    def _line(self, route: Route, body: bytes, answer: bytes, seconds: float, when: float) -> bytes | None:
        """The record as one line, assembled from the bytes as they came: the server answered 200, so
        the body parsed as JSON (a binary tensor request, which is no JSON, is skipped); JSON's own
        line breaks are whitespace (inside a string they are escaped), so they become spaces. The
        replay reads every line back as hostile input all the same (runner.serving.records)."""
        if (
            body.lstrip()[:1] != b"{"
            or answer.lstrip()[:1] not in (b"{", b"[")
            or len(body) + len(answer) > MAX_LINE_BYTES - 512
        ):
            return None  # not JSON, or a line the replay's reader would refuse
        self.counter += 1
        second = int(when)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)).encode()
        head = b'{"id":"rec-%s-%d","route":"%s","body":' % (self.prefix, self.counter, route.value.encode())
        tail = b',"status":200,"answer":%s,"latency_ms":%.3f,"time":"%s"}\n' % (
            _flat(answer),
            seconds * 1000,
            self._stamp,
        )
        return head + _flat(body) + tail

    def _write(self, line: bytes) -> None:
        if self.current is None or self.files[-1][1] + len(line) > self.file_bytes or self.lines >= LINES_PER_FILE:
            self._rotate()
        self.lines += 1
        while sum(size for _, size in self.files) + len(line) > self.max_bytes and len(self.files) > 1:
            name, _ = self.files.pop(0)  # the oldest goes: never more than the cap on disk
            os.unlink(name, dir_fd=self.fd)
        os.write(self.current, line)
        name, size = self.files[-1]
        self.files[-1] = (name, size + len(line))

    def _rotate(self) -> None:
        if self.current is not None:
            os.close(self.current)
            self.current = None
        numbers = [int(match[1]) for name, _ in self.files if (match := _NUMBER.fullmatch(name))]
        name = f"requests-{(max(numbers) + 1 if numbers else 1):06d}.jsonl"
        self.current = os.open(name, FLAGS, 0o600, dir_fd=self.fd)  # request bodies: the owner's only
        self.files.append((name, 0))
        self.lines = 0
        while len(self.files) > FILES_PER_CAP:  # never more requests than a replay reads (MAX_REQUESTS)
            os.unlink(self.files.pop(0)[0], dir_fd=self.fd)


class RecordingLayer:
    """The KServe server's ASGI layer (inside the guard: only requests it let through): each POST to
    the model's :predict or infer, its body and its answer, handed to the recorder once answered."""

    def __init__(self, app, recorder: Recorder, name: str) -> None:
        self.app, self.recorder, self.name = app, recorder, name

    async def __call__(self, scope, receive, send) -> None:
        route = (
            Route.of_path(scope.get("path", ""), self.name)
            if scope.get("type") == "http" and scope.get("method") == "POST"
            else None
        )
        if route is None or route is Route.SCORE:
            await self.app(scope, receive, send)
            return
        body, answer, status, started = bytearray(), bytearray(), [0], time.perf_counter()

        async def receiving():
            message = await receive()
            if message.get("type") == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def sending(message) -> None:
            if message.get("type") == "http.response.start":
                status[0] = message.get("status", 0)
            elif message.get("type") == "http.response.body":
                answer.extend(message.get("body", b""))
            await send(message)

        await self.app(scope, receiving, sending)
        self.recorder.record(route, bytes(body), status[0], bytes(answer), time.perf_counter() - started)


def http_answer(answered: bytes) -> tuple[int, bytes]:
    """(status, body) of a whole HTTP/1.1 answer with a Content-Length (the scoring worker's); (0, b"")
    for anything else (chunked, cut short): not recorded."""
    head, separator, body = answered.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
        length = next(int(line.split(b":", 1)[1]) for line in lines[1:] if line.lower().startswith(b"content-length:"))
    except (IndexError, ValueError, StopIteration):
        return 0, b""
    return (status, body) if separator and len(body) == length else (0, b"")


def recording_arguments(parser) -> None:
    """The model servers' own flags for it (both: runner.serving.server and the scoring server)."""
    parser.add_argument(
        "--record-dir", type=Path, default=None, help="record the requests answered into this directory"
    )
    parser.add_argument("--record-sample", type=float, default=1.0, help="the share of requests recorded (default 1)")
    parser.add_argument("--record-max-mb", type=int, default=200, help="recordings on disk at most (default 200 MB)")


def recorder_of(args) -> Recorder | None:
    """The server's recorder, or None without --record-dir; ValueError (one line) for a DIR it cannot use."""
    if args.record_dir is None:
        return None
    import sys

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    recorder = Recorder(args.record_dir, args.record_sample, args.record_max_mb << 20, say)
    print(
        f"tftrain-serve: recording {args.record_sample:.0%} of the answered requests into {args.record_dir} "
        f"(at most {args.record_max_mb} MB)",
        flush=True,
    )
    return recorder


def _flat(data: bytes) -> bytes:
    return data.replace(b"\r", b" ").replace(b"\n", b" ") if b"\n" in data or b"\r" in data else data
