"""What a run.json must hold before its numbers reach the index: SQLite's INTEGER overflows past
64 bits (an OverflowError in the middle of a rebuild), and a time that is NaN, Infinity or past the
year 9999 breaks every listing that shows it. A record that fails is left out of the rebuild, one
line saying which key, like any unreadable record."""

from __future__ import annotations

MAX_TIME = 253402300799  # 9999-12-31 23:59:59 UTC: the last second time.localtime and strftime show


def is_time(value) -> bool:
    """A time SQLite stores and `tftrain runs` shows: a number from 1970 to the year 9999 (not
    NaN, not the Infinity or 1e999 a hand-edited run.json may hold)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_TIME


def _is_int64(value) -> bool:
    """An int SQLite's INTEGER holds (a bigger one is an OverflowError in the middle of a rebuild)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _optional(check):
    """A key run.json may leave null (a run not ended has no `ended`)."""
    return lambda value: value is None or check(value)


def _of(kind: type):
    """A key whose only rule is its JSON type."""
    return lambda value: isinstance(value, kind)


# (key, check) for the top of a run.json, as load_run completes it
RECORD_CHECKS = (
    ("status", _of(str)),
    ("created", is_time),
    ("ended", _optional(is_time)),
    ("exit_code", _optional(_is_int64)),
    ("message", _optional(_of(str))),
    ("git", _optional(_of(dict))),
)


def is_phase(phase) -> bool:
    """One of run.json's phases: {phase, started, ended}, with times as above."""
    return (
        isinstance(phase, dict)
        and isinstance(phase.get("phase"), str)
        and is_time(phase.get("started"))
        and _optional(is_time)(phase.get("ended"))
    )
