"""The requests a replay sends: one JSON object per line (JSON Lines), the same file whether a
served model recorded it (`tftrain serve --record`) or a user wrote it by hand and committed it.

    {"id": "r-17", "route": "v1", "body": {"instances": [[1.0, 2.0]]},
     "status": 200, "answer": {"predictions": [[0.1, 0.9]]}, "latency_ms": 3.2, "time": "2026-11-28T20:00:00Z"}

Only `body` is required. `route` says which of the server's routes answered it (Route: TensorFlow
Serving's :predict, the Open Inference Protocol's infer, Azure's /score); without one the replay
sends it where the model is served (/score for a scoring script, :predict otherwise). `id` names
the request in reports (never its body); a line without one is "line-N". `status`, `answer`,
`latency_ms` and `time` are what the recording server saw: kept, never trusted, never needed.

A request file is hostile input (committed by anyone with a pull request, recorded from traffic):
read with runner.history.untrusted's limits, at most MAX_REQUESTS lines of at most
MAX_LINE_BYTES each and MAX_FILE_BYTES in all, checked before more is read. A bad line is
RequestsError naming the file and line. Standard library only: the model server writes these.

TensorFlow Serving's warmup file (a SavedModel's assets.extra/tf_serving_warmup_requests: TFRecords
of PredictionLog) is known here by its name or its first record's framing (`is_warmup`), and read by
runner.replay.warmup (TensorFlow): runner.replay.sources.load_requests takes either.
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from runner.history.regular import open_regular
from runner.history.untrusted import BadRecord, checked

MAX_REQUESTS = 100_000  # a replay of more says nothing more about agreement, and takes hours
MAX_LINE_BYTES = 8 << 20  # one request's line: a batch of ~800,000 numbers as JSON
MAX_FILE_BYTES = 256 << 20  # a request file at most (a 1 GB file is refused before it is read)
MAX_ID_CHARS = 200
ID_PATTERN = re.compile(r"[A-Za-z0-9._:@/+=-]{1,200}")  # printable in a report and a PR comment as it is
RECORD_FILE = re.compile(r"requests-[0-9]{6}\.jsonl")  # what a recording directory holds (runner.serving.recording)
WARMUP_FILE = "tf_serving_warmup_requests"  # TensorFlow Serving's name for it, in a SavedModel's assets.extra/
TFRECORD_HEADER = 12  # a TFRecord: uint64 length, uint32 masked CRC-32C of the length, data, its masked CRC


class Route(str, enum.Enum):
    """Which route a request is sent to (the model's name is the served one's, not the recorded one's)."""

    V1 = "v1"  # POST /v1/models/NAME:predict (TensorFlow Serving REST: instances or inputs)
    V2 = "v2"  # POST /v2/models/NAME/infer (Open Inference Protocol, JSON tensors)
    SCORE = "score"  # POST /score (Azure's scoring contract: the script's run(raw_data))

    def path(self, name: str) -> str:
        return {Route.V1: f"/v1/models/{name}:predict", Route.V2: f"/v2/models/{name}/infer", Route.SCORE: "/score"}[
            self
        ]

    @classmethod
    def of_path(cls, path: str, name: str) -> Route | None:
        """The route a server answered on `path`, None for any other path (status, metadata, health)."""
        return next((route for route in cls if route.path(name) == path), None)


class RequestsError(ValueError):
    """A request file that cannot be replayed; str(): "FILE[:LINE]: why", one line."""


@dataclass(frozen=True)
class Request:
    """One request to replay: its JSON body, sent as JSON, to `route` (None: the served model's own)."""

    id: str
    body: Any
    route: Route | None = None
    recorded: dict = field(default_factory=dict)  # status, answer, latency_ms, time as recorded: never trusted

    def encoded(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

    def line(self) -> str:
        """This request as one line of a request file (what `read_requests` reads back)."""
        record = {
            "id": self.id,
            **({"route": self.route.value} if self.route else {}),
            "body": self.body,
            **self.recorded,
        }
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def read_requests(path: Path, limit: int = MAX_REQUESTS) -> list[Request]:
    """The requests in `path`: a JSON Lines file, or a recording directory (its requests-NNNNNN.jsonl
    files in order). RequestsError when there are none, too many, or a line is not a request.
    runner.replay.sources.load_requests reads a TensorFlow Serving warmup file as well."""
    files = _files(path)
    if len(files) == 1 and files[0] is path and is_warmup(path):
        raise RequestsError(
            f"{path}: a TensorFlow Serving warmup file (TFRecords), not JSON Lines: read with"
            " runner.replay.sources.load_requests"
        )
    requests: list[Request] = []
    seen: set[str] = set()
    total = 0
    for file in files:
        for number, raw in _lines(file, MAX_FILE_BYTES - total):
            total += len(raw)
            if not raw.strip():
                continue
            if len(requests) >= limit:
                raise RequestsError(f"{file}:{number}: more than {limit} requests: replay a sample of them")
            request = parse_line(raw, f"{file}:{number}", f"line-{len(requests) + 1}")
            if request.id in seen:
                raise RequestsError(f"{file}:{number}: id {request.id!r} is used twice: each request needs its own")
            seen.add(request.id)
            requests.append(request)
    if not requests:
        raise RequestsError(f'{path}: no requests in it (one JSON object per line, with a "body")')
    return requests


def parse_line(raw: bytes, where: str, default_id: str) -> Request:
    """One line of a request file as a Request; RequestsError naming `where` otherwise."""
    try:
        value = checked(json.loads(raw.decode("utf-8")), where)
    except UnicodeDecodeError:
        raise RequestsError(f"{where}: not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        message = str(exc) if isinstance(exc, BadRecord) else f"{where}: not JSON ({exc})"  # BadRecord names `where`
        raise RequestsError(message) from None
    if not isinstance(value, dict) or "body" not in value:
        raise RequestsError(f'{where}: a request is a JSON object with a "body" (the JSON the server is sent)')
    request_id = value.get("id", default_id)
    if not isinstance(request_id, str) or not ID_PATTERN.fullmatch(request_id):
        raise RequestsError(f"{where}: id must be 1–{MAX_ID_CHARS} characters of letters, digits and ._:@/+=-")
    route = value.get("route")
    if route is not None:
        try:
            route = Route(route)
        except ValueError:
            raise RequestsError(f"{where}: route {route!r} is none of {', '.join(r.value for r in Route)}") from None
    recorded = {key: value[key] for key in ("status", "answer", "latency_ms", "time") if key in value}
    return Request(request_id, value["body"], route, recorded)


def write_requests(path: Path, requests: Iterable[Request]) -> int:
    """`requests` as a request file at `path` (a new file: an existing one is refused); how many."""
    count = 0
    with open(path, "x", encoding="utf-8") as out:
        for request in requests:
            out.write(request.line() + "\n")
            count += 1
    return count


def is_warmup(path: Path) -> bool:
    """Whether `path` is (meant as) a TensorFlow Serving warmup file: named as TF Serving names
    one, or starting with a TFRecord header (a JSON Lines file's first 8 bytes matching their own
    CRC-32C is a 1 in 2**32 chance)."""
    if path.name == WARMUP_FILE:
        return True
    try:
        with open_regular(path) as handle:
            head = handle.read(TFRECORD_HEADER)
    except OSError:
        return False  # read_requests says what is wrong with it
    return len(head) == TFRECORD_HEADER and masked_crc32c(head[:8]) == int.from_bytes(head[8:], "little")


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset (tensorflow/core/lib/hash/crc32c.h)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _files(path: Path) -> list[Path]:
    if path.is_symlink():
        raise RequestsError(f"{path}: a link: give the file or directory itself")
    if path.is_dir():
        files = sorted(child for child in path.iterdir() if RECORD_FILE.fullmatch(child.name))
        if not files:
            raise RequestsError(
                f"{path}: no recorded requests in it (requests-NNNNNN.jsonl files, as `tftrain serve --record` writes)"
            )
        for file in files:  # a recording holds files; a link in it would read wherever it points
            if file.is_symlink():
                raise RequestsError(f"{file}: a link: a recording directory holds the request files themselves")
        return files
    if not path.exists():
        raise RequestsError(f"{path}: no such file")
    return [path]


def _lines(file: Path, budget: int) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of `file`, a regular file, never reading more than `budget` bytes in all
    or MAX_LINE_BYTES in one line."""
    try:
        handle = open_regular(file)
    except OSError as exc:
        raise RequestsError(f"{file}: {exc.strerror or exc}") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > budget:
            raise RequestsError(
                f"{file}: {size} bytes: request files hold at most {MAX_FILE_BYTES >> 20} MiB in all; replay a sample"
            )
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise RequestsError(
                    f"{file}:{number}: a line over {MAX_LINE_BYTES >> 20} MiB: one request is at most that"
                )
            yield number, raw
