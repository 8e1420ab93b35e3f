"""Where a replay's requests come from: a request file or a recording directory (JSON Lines,
runner.serving.records), or TensorFlow Serving's warmup file (TFRecords of PredictionLog,
runner.replay.warmup: TensorFlow is imported only for one). Wherever requests are given
(`model.replay.requests`, `tftrain replay REQUESTS`), this is the reader."""

from __future__ import annotations

from pathlib import Path

from runner.serving.records import MAX_REQUESTS, Request, RequestsError, is_warmup, read_requests


def load_requests(path: Path, limit: int = MAX_REQUESTS) -> list[Request]:
    """The requests at `path`: a warmup file's (known by its name or its TFRecord framing), else
    read_requests'. RequestsError naming the file and line or record; MissingExtra for a warmup
    file without TensorFlow or tensorflow-serving-api."""
    if path.is_symlink() or not path.is_file() or not is_warmup(path):
        return read_requests(path, limit)
    from runner.replay.warmup import read_warmup

    requests = read_warmup(path)
    if len(requests) > limit:
        raise RequestsError(f"{path}: more than {limit} requests: replay a sample of them")
    return requests
