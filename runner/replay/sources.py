"""Where the requests a replay sends come from, whatever the file: a request file or a recording
directory (runner.replay.records), or TF Serving's warmup file (runner.replay.warmup, which needs
TensorFlow: imported only for one)."""

from __future__ import annotations

from pathlib import Path

from runner.replay.records import Request, read_requests
from runner.replay.warmup import is_warmup


def load_requests(path: Path) -> list[Request]:
    """The requests in `path`; RequestsError (one line: the file, the line or record) otherwise."""
    if path.is_file() and not path.is_symlink() and is_warmup(path):
        from runner.replay.warmup import read_warmup

        return read_warmup(path)
    return read_requests(path)
