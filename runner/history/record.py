"""What a run's directory records about it: run.json (`RunRecord`, with its `RunStatus` and
phases) and metrics.json (`MetricsSummary`). Both are read and written through these models only."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.history.states import Cause, RunStatus
from runner.history.untrusted import BadRecord, read_json
from runner.history.usage import Usage

LOST_MESSAGE = "lost:"  # how records written before `cause` began a lost run's message: read once, in RunRecord
# how records written before its cause began a pruned trial's message: read once, in RunRecord
EARLY_TERMINATION_MESSAGE = "early termination"
EXIT_CODE_WORDS = re.compile(r"exit code ([0-9]{1,3})")  # an attempt's `ended` in run.json, when an exit code ended it


def empty_list() -> list:
    """A list field's default_factory, a function for pydantic's sake (runner.manifest.fields says
    why); here, so that reading a run's record never imports the manifest's models (~90 ms)."""
    return []


class _Model(BaseModel):
    # keys this version does not know (written by a newer one) are kept, never dropped; lax: a
    # record is tftrain's own writing, read back; built on first use (`tftrain --version` never is)
    model_config = ConfigDict(extra="allow", defer_build=True)


class MetricStats(_Model):
    """One metric's summary. A value that is no finite number is written as its name ("nan",
    "inf"): JSON has no such number."""

    last: float | str
    best: float | str
    best_step: int | None = None
    count: int
    goal: str


class ImageNote(_Model):
    """An image the script logged: its path inside the run's outputs."""

    name: str
    path: str
    rank: int = 0


class MetricsSummary(_Model):
    """What metrics.json holds (and run.json's `metrics`, and a model version's): per metric its
    last and best value, the primary metric, the images and tags the script logged.

    "last" is the point with the greatest step; a point without a step comes before every point
    with one; equal steps go by time, then by arrival (the later wins). The step, not the time,
    comes first because the sources do not share a clock: a log line's time is when tftrain read
    it, a TensorBoard point's is the training host's (another machine, a container), and the
    TensorBoard points are only read once the training has ended.
    """

    primary: str | None = None
    metrics: dict[str, MetricStats] = Field(default_factory=dict)
    images: list[ImageNote] = Field(default_factory=empty_list)
    tags: dict[str, str] = Field(default_factory=dict)

    def as_dict(self) -> dict:
        """The JSON object: images and tags only when there are some."""
        data = self.model_dump(mode="json", exclude={"images", "tags"})
        if self.images:
            data["images"] = [image.model_dump(mode="json") for image in self.images]
        if self.tags:
            data["tags"] = dict(self.tags)
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2) + "\n"

    def primary_last(self) -> float | str | None:
        """The primary metric's last value; None when there is none."""
        stats = self.metrics.get(self.primary) if self.primary else None
        return stats.last if stats else None


class Phase(_Model):
    phase: RunStatus
    started: float
    ended: float | None = None
    reason: str | None = None  # why the run waits in it (Queued: Slurm's pending reason), as last told

    def as_dict(self) -> dict:
        """run.json's form: a reason only where the run waited for one."""
        return self.model_dump(mode="json", exclude=None if self.reason is not None else {"reason"})


class Attempt(_Model):
    """One attempt of a manifest with `retry:`: its place in the chain, what it resumed from, and
    why it ended when that was a cause to retry (runner.training.retry)."""

    number: int
    max_attempts: int
    previous: str | None = None  # the run this attempt continues
    resumed_from: str | None = None  # the previous attempt's checkpoint it was given (resume_from)
    ended: Cause | None = None  # why another attempt follows (or would have)
    exit_code: int | None = None  # the script's, when it `ended` by an exit code `retry:` names
    next: str | None = None  # the run that continued it

    @model_validator(mode="before")
    @classmethod
    def _exit_code_words(cls, data):
        """run.json holds an exit code ending as "exit code N" (one value, as people read it)."""
        words = (
            EXIT_CODE_WORDS.fullmatch(data["ended"])
            if isinstance(data, dict) and isinstance(data.get("ended"), str)
            else None
        )
        # anything else is checked as a Cause (an unknown word is a damaged record, as an unknown status)
        if words is not None:
            data = {**data, "ended": Cause.EXIT_CODE, "exit_code": int(words[1])}
        return data

    @property
    def ending(self) -> str | None:
        """How it ended, in words: "preempted", "lost", "exit code N"."""
        if self.ended == Cause.EXIT_CODE:
            return f"{Cause.EXIT_CODE} {self.exit_code}"
        return None if self.ended is None else self.ended.value

    def as_dict(self) -> dict:
        """run.json's form: the exit code within `ended`, as records have always held it."""
        data = self.model_dump(mode="json", exclude={"exit_code"})
        data["ended"] = self.ending
        return data

    def described(self) -> str:
        """One line for `tftrain runs show`."""
        parts = [f"attempt {self.number} of {self.max_attempts}"]
        if self.previous:
            parts.append(
                f"continues {self.previous}"
                + (f" from {self.resumed_from}" if self.resumed_from else " from the start")
            )
        if self.ended:
            parts.append(f"ended {self.ending}")
        if self.next:
            parts.append(f"continued by {self.next}")
        return "; ".join(parts)


class RunRecord(_Model):
    """What run.json holds: written when the run is created, kept up to date by the store at every
    phase, completed with the results (model, metrics) at the end."""

    run_id: str
    name: str
    status: RunStatus
    created: float
    ended: float | None = None
    exit_code: int | None = None
    message: str | None = None
    manifest: dict
    git: dict = Field(default_factory=dict)
    owner: dict | None = None
    phases: list[Phase] = Field(default_factory=empty_list)
    model: str | None = None
    metrics: MetricsSummary | None = None
    sweep: dict | None = None  # {"id": SWEEP_ID, "trial": N} for a sweep's trial
    attempt: Attempt | None = None  # a run of a manifest with `retry:`
    cause: Cause | None = None  # why it ended from outside (lost: its tftrain was gone), when it did
    usage: Usage | None = None  # what its training used and cost (runner.history.usage), once it ran
    # {"seed": N, "of": RUN_ID}: one of the seeds an `evaluation:` trains (runner.verdict.seeds)
    seed: dict | None = None
    evaluation: dict | None = None  # the evidence kept and the verdict, on the run whose model is registered (seed 0's)

    def add_phase(self, name: RunStatus, ended: bool, now: float | None = None) -> float:
        """End the open phase and start `name` (ended at once for the final status); returns the time."""
        now = time.time() if now is None else now
        phases = [phase for phase in self.phases if phase.phase != name]
        for phase in phases:
            if phase.ended is None:
                phase.ended = now
        self.phases = [*phases, Phase(phase=name, started=now, ended=now if ended else None)]
        return now

    def waits(self, reason: str | None) -> None:
        """Why the run waits in its open phase (a scheduler's queue): kept on the phase, and as the
        run's message (`tftrain runs`) until the next phase begins."""
        told = self.phases[-2].reason if len(self.phases) > 1 else None
        if self.phases:
            self.phases[-1].reason = reason
        if reason is not None or (told is not None and self.message == told):
            self.message = reason

    @model_validator(mode="before")
    @classmethod
    def _lost_by_message(cls, data):
        """A record written before `cause` says a run was lost only in its message: read it once, here."""
        if isinstance(data, dict) and data.get("cause") is None and data.get("status") == RunStatus.FAILED:
            if str(data.get("message") or "").startswith(LOST_MESSAGE):
                data = {**data, "cause": Cause.LOST}
        if isinstance(data, dict) and data.get("cause") is None and data.get("status") == RunStatus.CANCELED:
            if data.get("sweep") and str(data.get("message") or "").startswith(EARLY_TERMINATION_MESSAGE):
                data = {**data, "cause": Cause.EARLY_TERMINATION}
        return data

    @field_validator("git", mode="before")
    @classmethod
    def _no_git(cls, value):
        return {} if value is None else value  # older records wrote null

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        """OSError or ValueError (untrusted.BadRecord and the ValidationError are ones) when missing
        or unreadable: read by runner.history.untrusted (bounded, never blocking on a FIFO)."""
        record = read_json(path, path.name)
        if not isinstance(record, dict):
            raise BadRecord(f"{path.name}: not a JSON object")
        return cls.model_validate(record)

    def as_dict(self) -> dict:
        unset = {
            key for key in ("sweep", "attempt", "cause", "usage", "seed", "evaluation") if getattr(self, key) is None
        }  # a trial's, an attempt's, a lost run's, a seed's only
        data = self.model_dump(mode="json", exclude={"metrics", "attempt", "usage"} | unset)
        if self.usage is not None:
            data["usage"] = self.usage.as_dict()
        data["metrics"] = self.metrics.as_dict() if self.metrics is not None else None
        data["phases"] = [phase.as_dict() for phase in self.phases]
        if self.attempt is not None:
            data["attempt"] = self.attempt.as_dict()
        return data

    @property
    def lost(self) -> bool:
        """Its tftrain was gone before it ended: a command that reconciles the history marked it Failed."""
        return self.cause == Cause.LOST

    @property
    def finished(self) -> bool:
        return self.status.terminal
