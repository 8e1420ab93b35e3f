"""What a replay found (replay.json): how many requests, how many both sides answered, how many of
those they answered alike, each output's largest and mean |Δ|, the requests that disagree most (ids,
never bodies), status differences, and each side's p50/p99 latency. Read back as hostile input (a
release's asset): pydantic checks every field, runner.history.untrusted the file."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.history.untrusted import BadRecord, read_json
from runner.replay.compare import Agreement

SHOWN_IDS = 10  # disagreeing requests named in a report (the worst first)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Latency(_Model):
    p50_ms: float = Field(ge=0, allow_inf_nan=False)
    p99_ms: float = Field(ge=0, allow_inf_nan=False)


class OutputDelta(_Model):
    max_abs: float | None = Field(ge=0, allow_inf_nan=False)  # None: the two sides' shapes differed
    mean_abs: float | None = Field(ge=0, allow_inf_nan=False)


class Disagreement(_Model):
    id: str = Field(max_length=200)
    max_abs: float | None = Field(ge=0, allow_inf_nan=False)


class StatusDifference(_Model):
    id: str = Field(max_length=200)
    candidate: int  # 0: no answer (refused connection, timeout)
    baseline: int


class ReplayReport(_Model):
    candidate: str = Field(max_length=300)
    baseline: str | None = Field(default=None, max_length=300)  # None: the first version, replayed alone
    origin: str = Field(default="", max_length=300)  # where the requests came from
    requests: int = Field(ge=0)
    answered: int = Field(ge=0)  # answered 200 by both (by the candidate, alone)
    agreed: int = Field(ge=0)
    by: Agreement = Agreement.VALUES
    tolerance: float = Field(ge=0, allow_inf_nan=False)
    concurrency: int = Field(ge=1)
    outputs: dict[str, OutputDelta] = Field(default_factory=dict)
    disagreeing: int = Field(default=0, ge=0)
    worst: list[Disagreement] = Field(default_factory=list, max_length=SHOWN_IDS)
    status_differences: int = Field(default=0, ge=0)
    candidate_failed: int = Field(default=0, ge=0)  # requests the baseline answered 200 and the candidate did not
    statuses: list[StatusDifference] = Field(default_factory=list, max_length=SHOWN_IDS)
    candidate_latency: Latency | None = None
    baseline_latency: Latency | None = None
    latency_ratio_low: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # the p99 ratio's 95 % interval
    latency_ratio_high: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # (runner.replay.latency)

    @property
    def agreement(self) -> float | None:
        """The share of the requests the baseline answered (200) that the candidate answered alike: one
        it failed to answer counts against it. None: the baseline answered none."""
        judged = self.answered + self.candidate_failed
        return self.agreed / judged if judged and self.baseline is not None else None

    @property
    def latency_ratio(self) -> float | None:
        if self.candidate_latency is None or self.baseline_latency is None or self.baseline_latency.p99_ms <= 0:
            return None
        return self.candidate_latency.p99_ms / self.baseline_latency.p99_ms

    @property
    def largest(self) -> float | None:
        """The largest |Δ| of any output; inf when an output's shapes differed; None: nothing compared."""
        values = [math.inf if delta.max_abs is None else delta.max_abs for delta in self.outputs.values()]
        return max(values, default=None)

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path) -> ReplayReport:
        """replay.json; ValueError (one line, naming the file) when it is not one."""
        try:
            return cls.model_validate(read_json(path))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise BadRecord(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    def line(self) -> str:
        """One line: "replayed 1,000 recorded requests: 99.6 % same class, max |Δ| 0.03, p99 1.1× the release's"."""
        replayed = f"replayed {self.requests:,} request{'s' * (self.requests != 1)}" + (
            f" of {self.origin}" if self.origin else ""
        )
        if self.baseline is None:
            latency = f", p99 {self.candidate_latency.p99_ms:.3g} ms" if self.candidate_latency else ""
            return f"{replayed} against the candidate alone (no earlier version): {self.answered:,} answered{latency}"
        agreement = self.agreement
        same = "same class" if self.by is Agreement.TOP_CLASS else "same answer"
        parts = [f"{agreement:.1%} {same}" if agreement is not None else "no request answered by both"]
        if self.largest is not None:
            parts.append(f"max |Δ| {_number(self.largest)}")
        if self.latency_ratio is not None:
            interval = (
                f" [{self.latency_ratio_low:.2g}, {self.latency_ratio_high:.2g}]"
                if self.latency_ratio_low is not None and self.latency_ratio_high is not None
                else ""
            )
            parts.append(f"p99 {self.latency_ratio:.2g}×{interval} {self.baseline}'s")
        if self.status_differences:
            parts.append(f"{self.status_differences} answered with another status")
        return f"{replayed}: " + ", ".join(parts)

    def markdown(self) -> str:
        """A small table: per side, answered, p50, p99; per output, max and mean |Δ|; the worst ids."""
        sides = [("candidate", self.candidate, self.candidate_latency)]
        if self.baseline is not None:
            sides.append(("baseline", self.baseline, self.baseline_latency))
        lines = ["| side | version | p50 | p99 |", "|---|---|---:|---:|"]
        for role, label, latency in sides:
            p50, p99 = (f"{latency.p50_ms:.3g} ms", f"{latency.p99_ms:.3g} ms") if latency else ("—", "—")
            lines.append(f"| {role} | {_cell(label)} | {p50} | {p99} |")
        if self.outputs and self.baseline is not None:
            lines += ["", "| output | max \\|Δ\\| | mean \\|Δ\\| |", "|---|---:|---:|"]
            lines += [
                f"| {_cell(name)} | {_number(d.max_abs)} | {_number(d.mean_abs)} |"
                for name, d in sorted(self.outputs.items())
            ]
        if self.worst:
            shown = ", ".join(f"`{_cell(item.id)}` ({_number(item.max_abs)})" for item in self.worst)
            lines += ["", f"Disagreeing ({self.disagreeing:,}, worst first): {shown}"]
        if self.statuses:
            shown = ", ".join(
                f"`{_cell(item.id)}` {item.candidate or 'no answer'} vs {item.baseline or 'no answer'}"
                for item in self.statuses
            )
            lines += ["", f"Other status ({self.status_differences:,}): {shown}"]
        return "\n".join(lines)

    def problems(self, min_agreement: float | None, max_latency_ratio: float | None) -> list[str]:
        """What fails the thresholds, one line each (nothing: the candidate passes)."""
        problems = []
        if self.answered < self.requests and self.baseline is None:
            problems.append(f"the candidate answered {self.answered} of {self.requests} requests")
        if self.baseline is not None and min_agreement is not None:
            agreement = self.agreement
            if agreement is None or agreement < min_agreement:
                ids = ", ".join(item.id for item in self.worst) or ", ".join(item.id for item in self.statuses)
                share = "none answered by both" if agreement is None else f"{agreement:.1%} answered alike"
                problems.append(f"{share}, below min_agreement {min_agreement:.1%}" + (f" (e.g. {ids})" if ids else ""))
        ratio = self.latency_ratio
        surely = (
            self.latency_ratio_low if self.latency_ratio_low is not None else ratio
        )  # slower beyond the noise of a tail
        if max_latency_ratio is not None and surely is not None and surely > max_latency_ratio:
            problems.append(
                f"p99 {ratio:.2f}× {self.baseline}'s (at least {surely:.2f}× at 95 % confidence), above"
                f" max_latency_ratio {max_latency_ratio:g}"
            )
        return problems


def _number(value: float | None) -> str:
    return "∞ (another shape, or no answer)" if value is None or math.isinf(value) else f"{value:.3g}"


def _cell(text: str) -> str:
    """Text another party chose (an id, an output's name), safe inside a table cell and backticks."""
    return "".join(ch for ch in text if ch.isprintable()).replace("|", "\\|").replace("`", "'")[:200]
