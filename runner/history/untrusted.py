"""The one reader of records another party can write: run.json, version.json, manifest.lock.yml
(a run directory is the training's to write to, a home may come from a cache or a backup), and the
JSON columns of tftrain.db. What it gives back can be walked, stored and printed: at most
MAX_BYTES, MAX_DEPTH levels of lists and mappings (a 100,000-level file is a RecursionError in
json, pydantic, SQLite and every walk after), numbers that are finite and fit SQLite's INTEGER,
strings that are Unicode (JSON's "\\ud800" is a lone surrogate no UTF-8 writer takes). Anything
else is one `BadRecord` (a ValueError) naming the file: its reader says it in one line and sets the
record aside, and the rest of the history keeps working."""

from __future__ import annotations

import json
import math
from pathlib import Path

from runner.history.regular import open_regular

MAX_BYTES = 64 << 20  # a lock file lists every package and the plan; records are far smaller
MAX_DEPTH = 64  # a record is ~20 deep (a manifest nests 16 at most, within run.json's 2)
MAX_INT_DIGITS = 19  # past that, no int64; checked before int() reads it (a 5,000-digit number)
INT64 = 2**63


class BadRecord(ValueError):
    """A record that cannot be used as it is; str(): "NAME: why", one line."""


def read_json(path: Path, name: str | None = None) -> object:
    """The JSON value in the regular file `path` (OSError when it is missing or not a regular
    file, BadRecord when it is not a record tftrain could have written)."""
    return load_json(_read(path, name or str(path)), name or str(path))


def optional_mapping(path: Path, warn=None) -> dict:
    """The JSON object in `path`, or {} when there is none or it cannot be used (a record another
    party may have written, that a report can do without); `warn(line)` hears why, once."""
    try:
        value = read_json(path)
    except FileNotFoundError:
        return {}
    except (OSError, BadRecord) as exc:
        if warn is not None:
            warn(f"{path} left out: {getattr(exc, 'strerror', None) or exc}")
        return {}
    if not isinstance(value, dict):
        if warn is not None:
            warn(f"{path} left out: not a JSON object")
        return {}
    return value


def read_yaml(path: Path, name: str | None = None) -> object:
    """The YAML document in the regular file `path`, as read_json holds JSON; no aliases."""
    return load_yaml(_read(path, name or str(path)), name or str(path))


def load_json(data: bytes | str, name: str) -> object:
    if isinstance(data, bytes):
        data = _text(data, name)
    try:
        value = json.loads(
            data, parse_int=lambda digits: _int(digits, name), parse_constant=lambda word: _refuse(name, word)
        )
    except RecursionError:
        raise BadRecord(f"{name}: nested deeper than {MAX_DEPTH} levels") from None
    except BadRecord:
        raise
    except ValueError as exc:
        raise BadRecord(f"{name}: not JSON ({str(exc)[:120]})") from None
    return checked(value, name)


def load_yaml(data: bytes, name: str) -> object:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it: a lock lists every package
    text = _text(data, name)
    try:
        # an alias is a reference: a few lines of them expand into gigabytes once written as JSON
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=loader)):
            raise BadRecord(f"{name}: holds YAML aliases")
        value = yaml.load(text, Loader=loader)
    except RecursionError:
        raise BadRecord(f"{name}: nested deeper than {MAX_DEPTH} levels") from None
    except BadRecord:
        raise
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: int() of a 5,000-digit number
        raise BadRecord(
            f"{name}: not YAML ({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"
        ) from None
    return checked(value, name, scalars=True)


def checked(value: object, name: str, scalars: bool = False) -> object:
    """`value` when it is a record as the module says, else BadRecord. `scalars`: YAML's other
    scalars (dates) pass; every other type, and mapping keys that are not strings, are JSON's."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise BadRecord(f"{name}: nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                stack += [(key, depth) for key in item]
                stack += [(child, depth + 1) for child in item.values()]
            else:
                stack += [(child, depth + 1) for child in item]
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BadRecord(f"{name}: holds a string that is not Unicode (a lone surrogate)") from None
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -INT64 <= item < INT64:
                raise BadRecord(f"{name}: holds a number past 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadRecord(f"{name}: holds NaN or Infinity, which is not JSON")
        elif not scalars:
            raise BadRecord(f"{name}: holds a {type(item).__name__}")
    return value


def _read(path: Path, name: str) -> bytes:
    with open_regular(path) as handle:  # never blocks on a FIFO put in its place
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise BadRecord(f"{name}: larger than {MAX_BYTES >> 20} MiB")
    return data


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecord(f"{name}: not UTF-8 (byte {exc.start})") from None


def _int(digits: str, name: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise BadRecord(f"{name}: holds a number past 64 bits")
    return int(digits)


def _refuse(name: str, word: str):
    raise BadRecord(f"{name}: holds NaN or Infinity ({word}), which is not JSON")
