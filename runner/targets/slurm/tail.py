"""Following files a Slurm job writes on the shared filesystem (rank-N.log, batch.log) as if they
were the pipes of local processes: each file is copied into a pipe that the run's LogPump reads, so
every rank's lines reach the console, the rank's log and the metric parsers exactly as on the
local target."""

from __future__ import annotations

import os
import threading
from pathlib import Path

POLL_SECONDS = 0.1
CHUNK = 1 << 16


class FileTail:
    """Copies `path` (which may not exist yet) into a pipe from its start; `finish` copies what is
    left and closes the pipe, which ends the pump's stream."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read_fd, self.write_fd = os.pipe()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._copy, name=f"tail-{path.name}", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        handle = None
        try:
            while True:
                ending = self.done.is_set()  # read once more after the job ended: what it wrote last
                if handle is None:
                    try:
                        handle = self.path.open("rb")
                    except OSError:
                        handle = None
                while handle is not None and (data := handle.read(CHUNK)):
                    os.write(self.write_fd, data)
                if ending:
                    return
                self.done.wait(POLL_SECONDS)
        except OSError:
            return  # the pump closed its end (the run is over)
        finally:
            if handle is not None:
                handle.close()
            os.close(self.write_fd)

    def finish(self, timeout: float = 10.0) -> None:
        self.done.set()
        self.thread.join(timeout)
