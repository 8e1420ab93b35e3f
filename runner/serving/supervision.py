"""What `tftrain serve` and the model server it starts agree on, so that neither outlives the other
in a way that matters: the port the server got (`--port 0`), and a lifeline — a pipe whose write end
only tftrain holds. When tftrain is gone, however it went (SIGKILL included: the kernel closes its
end), the server reads end-of-file, stops as on SIGTERM, and removes the temporary copy of the
version it was serving (tftrain cannot: it is gone). Standard library only: both sides import it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

PORT_LINE = "tftrain-serve: port {port} on {host}"
_PORT = re.compile(r"^tftrain-serve: port (\d+) on ")
COPY_PREFIX = "tftrain-serve-"  # refs.checked_out's temporary directory
STOP_GRACE_SECONDS = 10  # after the drain's own grace period: then the server is ended outright


def port_from_line(line: str) -> int | None:
    """The port in the server's PORT_LINE; None for any other line."""
    match = _PORT.match(line)
    return int(match[1]) if match else None


def lifeline() -> tuple[int, int]:
    """(read end for the server, write end tftrain keeps): the write end is not inherited by
    anything tftrain starts later."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, False)
    return read_end, write_end


def removable_copy(model_dir: Path, requested: Path | None) -> Path | None:
    """The directory the server may remove when it stops: only `requested` when it is the
    temporary directory that holds `model_dir` (a copy tftrain made), never anything else."""
    if requested is None:
        return None
    requested = requested.resolve()
    if requested.name.startswith(COPY_PREFIX) and model_dir.resolve().parent == requested:
        return requested
    raise ValueError(f"--remove-on-exit {requested}: only the {COPY_PREFIX}* directory holding --model-dir can be removed")


class Lifeline:
    """The server's side: watch the pipe; at end-of-file stop this process (SIGTERM to itself,
    the server's own clean stop) and, past the drain's grace period, end it outright. On exit,
    the temporary copy is removed."""

    def __init__(self, fd: int | None, copy: Path | None, grace_seconds: float) -> None:
        self.fd, self.copy, self.grace_seconds = fd, copy, grace_seconds

    def __enter__(self) -> Lifeline:
        if self.fd is not None:
            threading.Thread(target=self._watch, name="tftrain-lifeline", daemon=True).start()
        return self

    def _watch(self) -> None:
        try:
            while os.read(self.fd, 512):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(self.grace_seconds + STOP_GRACE_SECONDS)
        self.remove_copy()  # the clean stop did not finish: nothing of it may stay behind
        os._exit(1)

    def remove_copy(self) -> None:
        if self.copy is not None:
            shutil.rmtree(self.copy, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.remove_copy()


def stop_on_sigterm() -> None:
    """Until the HTTP server installs its own handler: SIGTERM (tftrain's, or the lifeline's)
    ends the start-up through the normal exit path, so the copy is removed on the way out."""

    def stop(signum, frame) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
