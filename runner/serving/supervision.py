"""What `tftrain serve` and the model server it starts agree on, so that nothing outlives tftrain:
the port the server got (`--port 0`), and a lifeline — a pipe whose write end only tftrain holds.
When tftrain is gone, however it went (SIGKILL included: the kernel closes its end), every holder
of the read end sees end-of-file: the model server stops as on SIGTERM, and a tiny watcher, started
with the temporary directory before anything is copied into it, removes that copy — tftrain cannot,
it is gone. Standard library only: both sides import it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PORT_LINE = "tftrain-serve: port {port} on {host}"
_PORT = re.compile(r"^tftrain-serve: port (\d+) on ")
STOP_GRACE_SECONDS = 10  # after the drain's own grace period: then the server is ended outright
# the watcher (python -I -S: nothing imported but what it needs); the pipe is its stdin
WATCHER = "import os, shutil, sys\nwhile os.read(0, 4096):\n    pass\nshutil.rmtree(sys.argv[1], ignore_errors=True)\n"


def port_from_line(line: str) -> int | None:
    """The port in the server's PORT_LINE; None for any other line."""
    match = _PORT.match(line)
    return int(match[1]) if match else None


@contextmanager
def lifeline(copy: Path) -> Iterator[int]:
    """The read end of a new lifeline (for the model server's --lifeline-fd), and a watcher that
    removes `copy` once the write end is closed: when this context ends, or when tftrain dies.
    os.pipe()'s ends are not inherited by anything else tftrain starts (pip, docker)."""
    read_end, write_end = os.pipe()
    try:
        # its own session: a terminal's Ctrl-C or hang-up reaches tftrain, which decides
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", WATCHER, str(copy)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        yield read_end
    finally:
        os.close(write_end)
        os.close(read_end)


class Lifeline:
    """The server's side: watch the pipe; at end-of-file stop this process (SIGTERM to itself,
    the server's own clean stop) and, past the drain's grace period, end it outright."""

    def __init__(self, fd: int | None, grace_seconds: float, give_up=None) -> None:
        self.fd, self.grace_seconds, self.give_up = fd, grace_seconds, give_up

    def watch(self) -> None:
        if self.fd is not None:
            threading.Thread(target=self._watch, name="tftrain-lifeline", daemon=True).start()

    def _watch(self) -> None:
        try:
            while os.read(self.fd, 512):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(self.grace_seconds + STOP_GRACE_SECONDS)
        if self.give_up is not None:
            self.give_up()
        os._exit(1)  # the clean stop did not finish


def supervised(lifeline_fd: int | None, grace_period: float, give_up=None) -> None:
    """How a model server tftrain started begins: SIGTERM ends its start-up cleanly, and it ends
    when tftrain's lifeline does (`give_up`, if any, runs before it is ended outright)."""
    stop_on_sigterm()
    Lifeline(lifeline_fd, grace_period, give_up).watch()


def stop_on_sigterm() -> None:
    """Until the HTTP server installs its own handler: SIGTERM (tftrain's, or the lifeline's)
    ends the start-up through the normal exit path (the default would end it without one)."""

    def stop(signum, frame) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def listen(host: str, port: int):
    """The listening socket, bound now (port 0: a free one), its port printed as PORT_LINE for
    `tftrain serve`; ValueError saying why it cannot be bound."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
    try:
        listener.bind((host, port))
    except (OSError, OverflowError) as exc:
        listener.close()
        raise ValueError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    print(PORT_LINE.format(port=listener.getsockname()[1], host=host), flush=True)
    return listener


# --- Processes a server starts (a scoring script may fork, daemonize, setsid): none outlives it.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """Linux's prctl(2); False where there is none (the guarantees below are Linux's)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def adopt_orphans() -> None:
    """Become the reaper of every process started below this one: a descendant whose parent ends
    (a daemon's double fork, setsid included) becomes this process's child, for end_descendants."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def end_with_parent() -> None:
    """SIGTERM to this process when its parent ends (SIGKILL included)."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def children() -> list[int]:
    """This process's children, from /proc."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    if int(stat.read().rsplit(b")", 1)[1].split()[1]) == me:
                        found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def end_descendants(group: int | None = None, seconds: float = 5.0) -> None:
    """SIGKILL `group` (a process group), then every child of this process, and again for those
    that become its children as their parents end (adopt_orphans), until none is left."""
    if group is not None:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = children()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in found:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # reaped already (a Popen's wait)
                time.sleep(0.01)


class DroppedAtShutdown(logging.Filter):
    """The tracebacks of tasks cancelled as the server stops, on uvicorn's logger: "Exception in ASGI
    application", once for every request still being received (a client that sent half a body, then
    nothing: it can never be answered), counted and said in one line (`said()`) when the server has
    ended; and the lifespan's (Starlette sends its traceback as text), shutdown's noise, left out."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        text = str(record.msg)
        if error is not None:
            cancelled = type(error).__name__ == "CancelledError"  # asyncio's, however imported
        else:
            cancelled = text.startswith("Traceback") and text.rstrip().endswith("CancelledError")
        if not cancelled:
            return True
        if text.startswith("Exception in ASGI application"):
            self.dropped += 1
        return False

    def said(self) -> str | None:
        if not self.dropped:
            return None
        return f"tftrain-serve: {self.dropped} requests still arriving when the server stopped were dropped unanswered"
