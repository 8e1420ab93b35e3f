"""A sweep's budget: `sweep.limits.max_gpu_hours` and `max_cost`. No trial starts that would take
the sweep past either: what the finished trials spent, plus each running trial and the next at the
finished trials' mean. Until a trial has finished there is no estimate, so one trial runs at a time
(concurrent trials wait for the first); a trial that could fit once the running ones end waits for
them. The running trials may still cost more than the mean: `passed` says so at the end."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from runner.history.usage import Usage


@dataclass(frozen=True)
class Measure:
    name: str  # the limit's key, as the manifest spells it
    limit: float
    unit: str

    def of(self, usage: Usage) -> float | None:
        return usage.gpu_hours if self.name == "max_gpu_hours" else usage.cost

    def amount(self, value: float) -> str:
        return f"{value:.4g}" + (f" {self.unit}" if self.unit else "")


class Go(Enum):
    """What the budget says of the next trial."""

    START = "start"
    WAIT = "wait"  # trials are running: the first one's cost is the estimate, or the next may fit once they end
    STOP = "stop"  # it would pass the budget with nothing running, or a cost cannot be counted


class NextTrial(NamedTuple):
    go: Go
    line: str | None = None  # STOP: why, one line naming the limit


class SweepBudget:
    def __init__(self, measures: list[Measure]) -> None:
        self.measures = measures
        self.lock = threading.Lock()
        self.spent = {m.name: 0.0 for m in measures}
        self.finished = 0
        self.unpriced: str | None = None  # a finished trial's run with no cost: max_cost cannot be kept

    @classmethod
    def of(cls, limits) -> SweepBudget | None:
        """The budget `sweep.limits` sets, or None when it sets none."""
        measures = []
        if limits.max_gpu_hours is not None:
            measures.append(Measure("max_gpu_hours", limits.max_gpu_hours, "GPU-hours"))
        if limits.max_cost is not None:
            measures.append(Measure("max_cost", limits.max_cost, ""))
        return cls(measures) if measures else None

    def add(self, run_id: str | None, usage: Usage | None) -> None:
        """A trial ended: what its run used (None: it never trained, and counts nothing)."""
        if usage is None:
            return
        with self.lock:
            self.finished += 1
            for measure in self.measures:
                value = measure.of(usage)
                if value is None:
                    self.unpriced = self.unpriced or run_id or "a trial"
                else:
                    self.spent[measure.name] += value

    def next_trial(self, running: int) -> NextTrial:
        """Whether the next trial may start while `running` trials of this runner run."""
        with self.lock:
            if self.unpriced is not None and any(m.name == "max_cost" for m in self.measures):
                return NextTrial(
                    Go.STOP,
                    f"sweep.limits.max_cost: run {self.unpriced} has no cost to count; set compute.cost "
                    "(or cost: in the pool file) to keep a cost budget",
                )
            if not self.finished:  # nothing to estimate from: the first trial runs alone
                return NextTrial(Go.WAIT if running else Go.START)
            for measure in self.measures:
                spent = self.spent[measure.name]
                mean = spent / self.finished
                if spent + mean * (running + 1) > measure.limit:
                    if running:  # their cost may differ from the mean: decide when they have ended
                        return NextTrial(Go.WAIT)
                    return NextTrial(
                        Go.STOP,
                        f"sweep.limits.{measure.name} ({measure.limit:g}{' ' + measure.unit if measure.unit else ''})"
                        f" would be passed: {_trials(self.finished)} spent {measure.amount(spent)}"
                        f" ({measure.amount(mean)} each on average), {running} still running; no more trials start",
                    )
        return NextTrial(Go.START)

    def passed(self) -> str | None:
        """One line naming each limit the finished trials spent more than, or None."""
        with self.lock:
            over = [
                f"sweep.limits.{m.name} ({m.limit:g}{' ' + m.unit if m.unit else ''}) was passed:"
                f" {_trials(self.finished)} spent {m.amount(self.spent[m.name])}"
                for m in self.measures
                if self.spent[m.name] > m.limit
            ]
        return "; ".join(over) or None


def _trials(count: int) -> str:
    return f"{count} trial" + ("" if count == 1 else "s")


def usage_of_run(home: Path, run_id: str | None) -> Usage | None:
    """A finished run's usage, read from its run.json (None: no such run, or it never trained)."""
    return usages_of_runs(home, [run_id])[0]


def usages_of_runs(home: Path, run_ids: list[str | None]) -> list[Usage | None]:
    """usage_of_run of each, with the history opened once (opening it checks the whole index)."""
    if not any(run_ids):
        return [None] * len(run_ids)
    from runner.errors import FatalError
    from runner.history.record import RunRecord
    from runner.history.rundir import RunPaths
    from runner.history.store import Store

    def usage(store: Store, run_id: str | None) -> Usage | None:
        if run_id is None:
            return None
        try:
            return RunRecord.read(RunPaths(store.run(run_id).run_dir).record).usage
        except (OSError, ValueError, FatalError):  # not found, or its record unreadable: nothing to count
            return None

    try:
        with Store(home) as store:
            return [usage(store, run_id) for run_id in run_ids]
    except (OSError, ValueError, FatalError):  # the history cannot be opened: nothing to count
        return [None] * len(run_ids)


def seed(budget: SweepBudget, home: Path, trials: list[dict]) -> None:
    """A resumed sweep's budget counts what its trials spent before."""
    ended = [trial.get("run_id") for trial in trials if trial.get("status") != "Running"]
    for run_id, usage in zip(ended, usages_of_runs(home, ended)):
        budget.add(run_id, usage)


def report_sweep_costs(logger, home: Path, document: dict, summary: Path | None = None) -> str:
    """Each trial's GPU-hours and cost and the sweep's total: a table on the console, appended to the
    sweep's summary.md (the pull request's comment shows it) and the job summary. Returns its Markdown."""
    from runner.telemetry.usage_report import sweep_costs, sweep_costs_markdown

    listed = document.get("trials", [])
    usages = usages_of_runs(home, [t.get("run_id") for t in listed])
    trials = [(t["number"], t.get("run_id"), usage) for t, usage in zip(listed, usages)]
    if not any(usage for _, _, usage in trials):
        return ""
    rows, total = sweep_costs(trials)
    logger.table(
        f"sweep {document.get('id')}: usage", ["trial", "run", "GPU-hours", "CPU-hours", "cost"], rows + [total]
    )
    markdown = "\n### Usage and cost\n\n" + sweep_costs_markdown(trials)
    if summary is not None and summary.is_file():
        with summary.open("a", encoding="utf-8") as handle:
            handle.write(markdown)
    logger.step_summary(markdown)
    return markdown
