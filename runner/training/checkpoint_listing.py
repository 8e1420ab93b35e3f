"""The `tftrain-checkpoints.json` a sync bucket holds, read as hostile input.

Whoever can write to the bucket must not reach past the checkpoint directory, crash tftrain or
keep it busy. So the listing is parsed here and nowhere else: its size is bounded (the caller
reads at most MAX_BYTES + 1), its nesting and its number of tokens are measured before `json`
sees it (a deep document would be a RecursionError, a wide one a gigabyte), its entries are
counted, and every value is checked for its type into frozen data classes. Every name that
becomes a path, or a quoted line of TensorFlow's `checkpoint` state file, passes `name_problem`;
the files a checkpoint lists must be the ones its kind is made of, so a listing cannot make two
entries collide. The writer (the sync) holds its own checkpoints to the same rules, so what it
lists is always what a reader accepts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from posixpath import dirname, join

from runner.errors import StorageError

MAX_BYTES = 16 * 1024**2
MAX_DEPTH = 16  # the listing itself is 4 deep: {checkpoints: [{files: {NAME: {…}}}]}
MAX_CHECKPOINTS = 10_000  # the sync lists the newest ones only
MAX_FILES = 1_000  # per checkpoint: TensorFlow writes one shard per saving device or ps task
MAX_TOKENS = 2_000_000  # a real listing has one per 8-11 bytes; 16 MiB of `"",` would take 1 GB to parse
# characters; levels; bytes in one part (NAME_MAX is 255, and a download's temporary name adds a suffix)
MAX_NAME, MAX_PARTS, MAX_PART_BYTES = 1024, 32, 200
VERSION = 1

SHARD = re.compile(r"^(?P<prefix>.+)\.data-(?P<index>\d+)-of-(?P<count>\d+)$")
KERAS_WEIGHTS, KERAS_METADATA = "latest.weights.h5", "training_metadata.json"
SHA256 = re.compile(r"[0-9a-f]{64}")
STATE_FILE = "checkpoint"  # what tf.train.latest_checkpoint reads in the checkpoint's directory

# a string (possessive, to its closing quote or the end: a failed match retried at every quote
# was quadratic), a bracket or a separator
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[][{},:]', re.DOTALL)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class CheckpointKind(str, Enum):
    TENSORFLOW = "tensorflow"  # tf.train.Checkpoint / CheckpointManager: PREFIX.index + shards
    KERAS_BACKUP = "keras-backup"  # keras.callbacks.BackupAndRestore's directory
    KERAS_FILE = "keras-file"  # model.save("….keras")


@dataclass(frozen=True)
class ListedFile:
    name: str  # relative to the checkpoint directory, POSIX, checked by name_problem
    size: int
    sha256: str


@dataclass(frozen=True)
class ListedCheckpoint:
    name: str
    kind: CheckpointKind
    time: float
    files: tuple[ListedFile, ...]

    def state_file(self) -> tuple[str, str] | None:
        """Where TensorFlow's `checkpoint` state file goes (relative) and what it says, so that
        tf.train.latest_checkpoint finds this checkpoint; None for Keras' kinds. The name was
        checked: no quote, backslash or line break can end or escape its quoted line."""
        if self.kind is not CheckpointKind.TENSORFLOW:
            return None
        directory, _, prefix = self.name.rpartition("/")
        text = f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n'
        return join(directory, STATE_FILE), text


class _Refused(Exception):
    """What is wrong, and where in the listing; parse_listing adds which listing."""


def parse_listing(body: bytes, where: str) -> tuple[ListedCheckpoint, ...]:
    """The checkpoints the listing `body` (read from `where`, at most MAX_BYTES + 1 bytes) names,
    every field checked; anything else is one StorageError naming `where` and the fault."""
    try:
        if len(body) > MAX_BYTES:
            raise _Refused(f"is over {MAX_BYTES // 1024**2} MiB")
        _measure(body)
        try:
            document = json.loads(body, parse_constant=_no_constant)
        except ValueError as exc:  # JSONDecodeError, bad UTF-8, a number of more than 4,300 digits
            raise _Refused(f"is not JSON: {_first_line(exc)}") from None
        return _listing(document)
    except _Refused as exc:
        raise StorageError(f"{where}: {exc}") from None


def listing_problem(name: str, kind: CheckpointKind, files: Iterable[str]) -> str | None:
    """Why a checkpoint found on disk cannot be listed (a reader would refuse it), or None: the
    sync skips it rather than write a listing no run could resume from."""
    try:
        _structure(name, kind, tuple(files), "checkpoint")
    except _Refused as exc:
        return str(exc)
    return None


def name_problem(name: object) -> str | None:
    """Why `name` is not a path inside the checkpoint directory, or None. Relative, POSIX, every
    part a real name (no empty, `.` or `..`), bounded in length and depth, and printable without a
    quote or backslash: it may become a quoted line of TensorFlow's state file."""
    if not isinstance(name, str):
        return f"must be a string, not {_type(name)}"
    if not name:
        return "is empty"
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if not name.isprintable() or '"' in name or "\\" in name:
        return "holds a control character, a line break, a quote or a backslash"
    if name.startswith("/"):
        return "is absolute: it must stay inside the checkpoint directory"
    parts = name.split("/")
    if len(parts) > MAX_PARTS:
        return f"is {len(parts)} levels deep (at most {MAX_PARTS})"
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' part: it must stay inside the checkpoint directory"
    if any(len(part.encode()) > MAX_PART_BYTES for part in parts):
        return f"has a part longer than {MAX_PART_BYTES} bytes"
    return None


def _measure(body: bytes) -> None:
    """Refuse a document nested deeper than MAX_DEPTH or made of more than MAX_TOKENS strings,
    brackets and separators, before json builds anything: one pass, stopping at the first
    excess, no recursion, nothing kept."""
    depth = 0
    for count, token in enumerate(_TOKEN.finditer(body), 1):
        if count > MAX_TOKENS:
            raise _Refused(f"holds over {MAX_TOKENS} values")
        depth += _STEP.get(body[token.start()], 0)
        if depth > MAX_DEPTH:
            raise _Refused(f"nests over {MAX_DEPTH} levels deep")


def _no_constant(name: str) -> float:
    raise _Refused(f"holds {name}, which is not a number")


def _listing(document: object) -> tuple[ListedCheckpoint, ...]:
    top = _mapping(document, "the listing")
    if top.get("version") != VERSION:
        raise _Refused(f"has version {_shown(top.get('version'))}, not {VERSION}")
    if "checkpoints" not in top:
        raise _Refused("has no 'checkpoints'")
    listed = top["checkpoints"]
    if not isinstance(listed, list):
        raise _Refused(f"checkpoints must be a list, not {_type(listed)}")
    if len(listed) > MAX_CHECKPOINTS:
        raise _Refused(f"lists {len(listed)} checkpoints (at most {MAX_CHECKPOINTS})")
    return tuple(_checkpoint(item, f"checkpoints[{number}]") for number, item in enumerate(listed))


def _checkpoint(item: object, at: str) -> ListedCheckpoint:
    entry = _mapping(item, at)
    name, kind_text, time, files = (_field(entry, key, at) for key in ("name", "kind", "time", "files"))
    try:
        kind = CheckpointKind(kind_text) if isinstance(kind_text, str) else None
    except ValueError:
        kind = None
    if kind is None:
        raise _Refused(f"{at}.kind {_shown(kind_text)} is none of {', '.join(k.value for k in CheckpointKind)}")
    files = _mapping(files, f"{at}.files")
    _structure(name, kind, tuple(files), at)
    listed = tuple(_file(file, value, f"{at}.files[{_shown(file)}]") for file, value in files.items())
    return ListedCheckpoint(name, kind, _time(time, at), listed)


def _time(value: object, at: str) -> float:
    """When the checkpoint was written: the latest is the one restored, so a finite number."""
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer of hundreds of digits
        number = math.nan
    if not math.isfinite(number):
        raise _Refused(f"{at}.time must be a number of seconds, not {_shown(value)}")
    return number


def _structure(name: object, kind: CheckpointKind, files: tuple[str, ...], at: str) -> None:
    """The checkpoint's name and files are paths inside the directory, and the files are what a
    checkpoint of its kind is made of (so no two entries collide, and the state file's directory
    is the files' own)."""
    for what, value in ((f"{at}.name", name), *((f"{at}.files", file) for file in files)):
        problem = name_problem(value)
        if problem:
            raise _Refused(f"{what} {_shown(value)} {problem}")
    if not files or len(files) > MAX_FILES:
        raise _Refused(f"{at}.files lists {len(files)} files (1 to {MAX_FILES})")
    if kind is CheckpointKind.TENSORFLOW:
        strays = [f for f in files if f != f"{name}.index" and not ((m := SHARD.match(f)) and m["prefix"] == name)]
        if f"{name}.index" not in files or strays:
            raise _Refused(f"{at}.files must be {_shown(name + '.index')} and its .data-K-of-N shards")
    elif kind is CheckpointKind.KERAS_BACKUP:
        parent = dirname(files[0])
        if sorted(files) != sorted(join(parent, f) for f in (KERAS_WEIGHTS, KERAS_METADATA)):
            raise _Refused(f"{at}.files must be {KERAS_WEIGHTS} and {KERAS_METADATA} in one directory")
    elif list(files) != [name]:
        raise _Refused(f"{at}.files must be the .keras file {_shown(name)} alone")


def _file(name: str, value: object, at: str) -> ListedFile:
    entry = _mapping(value, at)
    size, sha256 = _field(entry, "size", at), _field(entry, "sha256", at)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise _Refused(f"{at}.size must be a whole number of bytes, not {_shown(size)}")
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise _Refused(f"{at}.sha256 must be 64 lowercase hex digits, not {_shown(sha256)}")
    return ListedFile(name, size, sha256)


def _mapping(value: object, at: str) -> dict:
    if not isinstance(value, dict):
        raise _Refused(f"{at} must be a mapping, not {_type(value)}")
    return value


def _field(entry: dict, key: str, at: str) -> object:
    if key not in entry:
        raise _Refused(f"{at} has no {key!r}")
    return entry[key]


def _type(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: object, limit: int = 60) -> str:
    """A hostile value quoted on one bounded line (repr escapes line breaks and controls)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _first_line(exc: ValueError) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]
