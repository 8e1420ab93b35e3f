"""Per-example evidence: the file a training script writes with one row per evaluation example
(`evaluation.per_example`), read as hostile input, and two sides' seeds lined up on common ids.

Formats, by suffix: JSON Lines (`{"id": "...", "correct": 1, "loss": 0.03}` per line), CSV (a
header naming `id` and the metric), NumPy's .npz (an `id` array and the metric's array, no
pickles). The script, a release's assets or a copied home may have written it: it is read only
when it is a regular file (never through a link, never a FIFO), up to MAX_BYTES and MAX_ROWS, and
every id must be unique and every value a finite number. Anything else is one EvidenceError line
naming the file, and the row or field.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import math
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.errors import EvidenceError
from runner.serving.layout import MAX_EVIDENCE_BYTES

MAX_BYTES = MAX_EVIDENCE_BYTES  # a million rows of JSON are ~50 MB; ten times the largest evaluation sets we know of
MAX_ROWS = 5_000_000
MAX_ID = 256  # characters of one id
FORMATS = (".jsonl", ".csv", ".npz")


@dataclass(frozen=True)
class Evidence:
    """One seed's evidence: ids (str) and the metric's values, in the file's order."""

    source: str  # how its errors name it
    metric: str
    ids: tuple[str, ...]
    values: np.ndarray

    @property
    def fingerprint(self) -> str:
        """The evaluation set: sha256 of its sorted ids, one per line."""
        return hashlib.sha256("\n".join(sorted(self.ids)).encode()).hexdigest()

    def by_id(self) -> dict[str, float]:
        return dict(zip(self.ids, self.values.tolist()))


def _read(path: Path, source: str) -> bytes:
    """The file's bytes: a regular file, not a link, at most MAX_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise EvidenceError(f"{source}: not found (the script did not write it)") from None
    except OSError as exc:
        why = "a link (evidence is read only from a regular file)" if exc.errno == errno.ELOOP else exc.strerror
        raise EvidenceError(f"{source}: cannot be read ({why})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise EvidenceError(f"{source}: not a regular file")
        if info.st_size > MAX_BYTES:
            raise EvidenceError(f"{source}: {info.st_size >> 20} MB, over the {MAX_BYTES >> 20} MB evidence limit")
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise EvidenceError(f"{source}: over the {MAX_BYTES >> 20} MB evidence limit")
    if not data.strip():
        raise EvidenceError(f"{source}: empty")
    return data


def read_evidence(path: Path, metric: str, source: str | None = None) -> Evidence:
    source = source or str(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise EvidenceError(f"{source}: not {', '.join(FORMATS)} (JSON Lines, CSV or NumPy's npz)")
    data = _read(path, source)
    if suffix == ".npz":
        ids, values = _npz(data, metric, source)
    else:
        rows = _json_lines(data, source) if suffix == ".jsonl" else _csv_rows(data, source)
        ids, values = _columns(rows, metric, source)
    _check_ids(ids, source)
    return Evidence(source, metric, tuple(ids), np.asarray(values, dtype=np.float64))


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _json_lines(data: bytes, source: str):
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:120]
            raise EvidenceError(f"{source}:{number}: not a JSON object ({reason})") from None
        if not isinstance(row, dict):
            raise EvidenceError(f"{source}:{number}: not a JSON object with an id")
        yield number, row


def _csv_rows(data: bytes, source: str):
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvidenceError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise EvidenceError(f"{source}:{reader.line_num}: not CSV ({exc})") from None


def _number(value, metric: str, where: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        number = float(value) if not isinstance(value, int) or abs(value) < 1 << 1000 else math.inf
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise EvidenceError(f"{where}: {metric} is not a number ({value[:40]!r})") from None
    else:
        raise EvidenceError(f"{where}: {metric} is not a number ({type(value).__name__})")
    if not math.isfinite(number):
        raise EvidenceError(f"{where}: {metric} is not a finite number ({str(value)[:40]})")
    return number


def _columns(rows, metric: str, source: str) -> tuple[list[str], list[float]]:
    ids: list[str] = []
    values: list[float] = []
    for number, row in rows:
        where = f"{source}:{number}"
        if len(ids) >= MAX_ROWS:
            raise EvidenceError(f"{source}: over {MAX_ROWS:,} rows, the evidence limit")
        if "id" not in row or row["id"] in (None, ""):
            raise EvidenceError(f"{where}: no id")
        if metric not in row or row[metric] in (None, ""):
            raise EvidenceError(f"{where}: no {metric} (evaluation.metric)")
        ids.append(_id(row["id"], where))
        values.append(_number(row[metric], metric, where))
    if not ids:
        raise EvidenceError(f"{source}: no rows")
    return ids, values


def _id(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise EvidenceError(f"{where}: id is not a string or an integer")
    text = str(value)
    if len(text) > MAX_ID or not text.isprintable():
        raise EvidenceError(f"{where}: id is not a printable string of at most {MAX_ID} characters")
    return text


def _check_ids(ids: list[str], source: str) -> None:
    seen: set[str] = set()
    for index, value in enumerate(ids):
        if value in seen:
            raise EvidenceError(f"{source}: id {value!r} appears twice (row {index + 1} repeats it)")
        seen.add(value)


def _npz(data: bytes, metric: str, source: str) -> tuple[list[str], np.ndarray]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = {info.filename: info for info in archive.infolist()}
    except (zipfile.BadZipFile, ValueError) as exc:
        raise EvidenceError(f"{source}: not an npz archive ({exc})") from None
    for name in ("id", metric):
        info = members.get(f"{name}.npy")
        if info is None:
            raise EvidenceError(
                f"{source}: no {name!r} array (evaluation.metric names the values)"
                if name == metric
                else f"{source}: no 'id' array"
            )
        if info.file_size > MAX_BYTES:
            raise EvidenceError(
                f"{source}: array {name!r} unpacks to {info.file_size >> 20} MB, over the {MAX_BYTES >> 20} MB evidence"
                " limit"
            )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            ids, values = arrays["id"], arrays[metric]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise EvidenceError(
            f"{source}: not an npz archive of plain arrays ({str(exc).splitlines()[0][:120]})"
        ) from None
    if ids.ndim != 1 or values.ndim != 1 or ids.shape != values.shape:
        raise EvidenceError(
            f"{source}: 'id' and {metric!r} must be one-dimensional arrays of one length ({ids.shape}, {values.shape})"
        )
    if ids.size == 0:
        raise EvidenceError(f"{source}: no rows")
    if ids.size > MAX_ROWS:
        raise EvidenceError(f"{source}: over {MAX_ROWS:,} rows, the evidence limit")
    if values.dtype.kind not in "biuf":
        raise EvidenceError(f"{source}: {metric} is not numeric ({values.dtype})")
    if ids.dtype.kind not in "iuU":
        raise EvidenceError(f"{source}: id is not strings or integers ({ids.dtype})")
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise EvidenceError(f"{source}: row {bad[0] + 1}: {metric} is not a finite number")
    return [_id(value.item(), f"{source}: row {index + 1}") for index, value in enumerate(ids)], values


@dataclass(frozen=True)
class Paired:
    """Both sides' seeds over the examples every one of them scored, in sorted id order."""

    candidate: np.ndarray  # seeds × examples
    baseline: np.ndarray
    ids: tuple[str, ...]
    same_set: bool  # every seed of both sides scored the same examples (one fingerprint)
    left_out: int  # ids some seed scored and another did not

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(self.ids).encode()).hexdigest()


def line_up(candidate: list[Evidence], baseline: list[Evidence]) -> Paired:
    if not candidate or not baseline:
        raise EvidenceError(f"no per-example evidence on the {'candidate' if not candidate else 'baseline'}'s side")
    sides = [*candidate, *baseline]
    common = set(sides[0].ids).intersection(*(evidence.ids for evidence in sides[1:]))
    if not common:
        raise EvidenceError(
            f"{candidate[0].source} and {baseline[0].source} share no example id: they scored different evaluation sets"
        )
    everything = set().union(*(evidence.ids for evidence in sides))
    ids = tuple(sorted(common))

    def matrix(seeds: list[Evidence]) -> np.ndarray:
        rows = []
        for evidence in seeds:
            position = {value: index for index, value in enumerate(evidence.ids)}
            rows.append(evidence.values[[position[value] for value in ids]])
        return np.vstack(rows)

    return Paired(
        matrix(candidate), matrix(baseline), ids, len(everything) == len(common), len(everything) - len(common)
    )
