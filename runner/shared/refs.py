"""References to runs and model versions, parsed in one place: NAME, NAME@vN and NAME@latest for a
model; `latest`, a run number or a run id for a run; and the numbers in run (NAME-N) and version
(vN) directory names.

A number is what tftrain itself writes: ASCII digits, no sign, no leading zero, at most
MAX_DIGITS of them. Anything else (`v01`, Arabic-Indic `١٢`, which Python's int() would take, or
more digits than SQLite's 64-bit INTEGER holds) is not a number: a reference holding one names
nothing (NotFoundError, exit 5), and a directory named with one is never taken for a run or a
version. One spelling per run and version, and every number handed to SQLite fits, with room
for the +1 of the next one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from runner.errors import NotFoundError

MAX_DIGITS = 18  # 10**18 - 1 + 1 is still below SQLite's largest INTEGER (2**63 - 1)
MAX_NUMBER = 10**MAX_DIGITS - 1  # the last run number or version a reference can name
NUMBER = rf"[1-9][0-9]{{0,{MAX_DIGITS - 1}}}"
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
LATEST = "latest"
SHOWN_CHARS = 80  # a reference longer than this is cut in messages (one line, whatever was typed)
MODEL_REF_HELP = "use NAME, NAME@vN or NAME@latest"
NUMBER_HELP = f"{{what}} is {{example}} (ASCII digits, no leading zero, at most {MAX_DIGITS})"
MODEL_PREFIX, CHECKPOINT_PREFIX = "model:", "checkpoint:"  # resume_from's kinds of reference

_NUMBER = re.compile(NUMBER)
_MODEL_REF = re.compile(rf"(?P<name>{NAME})(?:@(?P<version>{LATEST}|v[^@]+))?")  # any vX: judged by `number`
_VERSION_DIR = re.compile(rf"v(?P<number>{NUMBER})")
_RUN_ID = re.compile(rf"(?P<name>.+)-(?P<number>{NUMBER})")


def number(text: str) -> int | None:
    """`text` as a number tftrain could have written, or None (see the module's docstring)."""
    return int(text) if _NUMBER.fullmatch(text) else None


def number_left(candidate: int) -> bool:
    """Whether a new run or version may take `candidate`: one past MAX_NUMBER could never be
    named (nor found again by a rebuild), so none is handed out."""
    return candidate <= MAX_NUMBER


def shown(ref: str) -> str:
    """A reference as messages quote it: repr'd (control characters escaped), cut when long."""
    return repr(ref if len(ref) <= SHOWN_CHARS else ref[:SHOWN_CHARS] + "…")


class ModelRef(NamedTuple):
    name: str
    version: int | None  # None: the latest

    @classmethod
    def parse(cls, ref: str) -> ModelRef:
        """NAME, NAME@vN or NAME@latest; NotFoundError for anything else, and for a vN that no
        version can have (leading zero, non-ASCII digits, out of range)."""
        problem = model_ref_problem(ref)
        if problem:
            raise NotFoundError(problem)
        match = _MODEL_REF.fullmatch(ref)
        version = match["version"]
        return cls(match["name"], None if version in (None, LATEST) else int(version[1:]))


def model_ref_problem(ref: str) -> str | None:
    """Why `ref` can name no registered version, or None: one sentence, for the command line
    (NotFoundError) and for the manifest's resume_from (refused at validate)."""
    match = _MODEL_REF.fullmatch(ref)
    if not match:
        return f"{shown(ref)} is not a model reference: {MODEL_REF_HELP}"
    version = match["version"]
    if version not in (None, LATEST) and number(version[1:]) is None:
        return f"model {shown(ref)} cannot exist: {NUMBER_HELP.format(what='a version', example='v1, v2, …')}"
    return None


def resume_ref_problem(ref: str) -> str | None:
    """Why the manifest's resume_from can name nothing, before anything runs: a model: reference
    `model_ref_problem` refuses, or a checkpoint: run number no run can have. Paths and run ids
    are looked up when the run starts."""
    if ref.startswith(MODEL_PREFIX):
        return model_ref_problem(ref[len(MODEL_PREFIX) :])
    if ref.startswith(CHECKPOINT_PREFIX) and RunRef.parse(ref[len(CHECKPOINT_PREFIX) :]).names_nothing:
        return (
            f"run {shown(ref[len(CHECKPOINT_PREFIX) :])} cannot exist:"
            f" {NUMBER_HELP.format(what='a run number', example='1, 2, …')}"
        )
    return None


class RunRef(NamedTuple):
    """`latest`, a run number (the N of NAME-N) or a run id; `number` is None for an id that
    only looks like a number but is none (`007`, `١٢`, 30 digits): no run has it."""

    latest: bool = False
    number: int | None = None
    run_id: str | None = None

    @classmethod
    def parse(cls, ref: str) -> RunRef:
        if ref == LATEST:
            return cls(latest=True)
        if ref.isdigit():  # any digits: the number they spell, or none at all
            return cls(number=number(ref))
        return cls(run_id=ref)

    @property
    def names_nothing(self) -> bool:
        return not self.latest and self.number is None and self.run_id is None


def run_number(run_id: str) -> int | None:
    """The N of a run id NAME-N; None when it has none tftrain could have given."""
    match = _RUN_ID.fullmatch(run_id)
    return int(match["number"]) if match else None


def version_of_dir(name: str) -> int | None:
    """The N of a version directory vN; None for any other name (`v01`, `v١`, `v` + 30 digits)."""
    match = _VERSION_DIR.fullmatch(name)
    return int(match["number"]) if match else None
