"""What a sweep keeps and shows: sweep.json under <home>/sweeps/SWEEP_ID (the `tftrain sweeps show
--json` object, rewritten after every trial), each trial's tftrain console log, the trials table,
and at the end the best trial's model registered as the next version of the model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import FatalError
from runner.history.rundir import writing
from runner.history.states import RunStatus
from runner.history.untrusted import read_json
from runner.sweep.pareto import best_words, objective_metrics, pareto_front, points_of
from runner.sweep.study import WARM, Sweep
from runner.sweep.summary import finite, summary_markdown, trial_row
from runner.telemetry.logger import Logger

if TYPE_CHECKING:
    from runner.serving.gate import GateResult


class SweepStatus(str, Enum):
    RUNNING = "Running"
    COMPLETED = "Completed"  # at least one trial completed with a value
    STOPPED_BY_BUDGET = "StoppedByBudget"  # as Completed, but its budget stopped it before max_total_trials (exit 30)
    OVER_BUDGET = "OverBudget"  # as Completed, but its trials spent more than its budget (exit 31)
    FAILED = "Failed"
    CANCELED = "Canceled"

    def __str__(self) -> str:
        return self.value


class TrialStatus(str, Enum):
    RUNNING = "Running"
    COMPLETED = "Completed"
    CANCELED = "Canceled"
    FAILED = "Failed"


def sweeps_root(home: Path) -> Path:
    return home / "sweeps"


class SweepBook:
    def __init__(
        self,
        home: Path,
        sweep: Sweep,
        register: bool = True,
        gate: Callable[[str], GateResult | None] | None = None,
        evidence: Callable[[str], dict[str, Path] | None] | None = None,
    ) -> None:
        """`register`: the manifest's model.register (the best trial's model becomes a version);
        `gate`: the model gate for a trial's run (its id), before the best trial's model is registered;
        `evidence`: the files an `evaluation:` keeps beside the best trial's model (its per-example file)."""
        self.home, self.sweep, self.register, self.gate, self.evidence = home, sweep, register, gate, evidence
        self.refused: FatalError | None = None  # the best trial's model failed the gate: nothing registered
        self.root = sweeps_root(home) / sweep.sweep_id
        self.root.mkdir(parents=True, exist_ok=True)
        self.created = time.time()
        self.status = SweepStatus.RUNNING
        self.model_version: str | None = None
        self.budget: str | None = None  # the line saying the budget stopped the sweep, or was passed
        self.lock = threading.Lock()
        self.save()

    def trial_log(self, number: int) -> Path:
        return self.root / "trials" / f"{number}.log"

    # --- the record ------------------------------------------------------------------------------
    def trials(self) -> list[dict]:
        rows = []
        metrics = self.sweep.metrics
        for trial in self.sweep.study.get_trials(deepcopy=False):
            attrs = trial.user_attrs
            if WARM in attrs:
                continue
            # a trial closed without a status: its tftrain was killed (resume closed it), it was canceled
            status = (
                attrs.get("status")
                or (TrialStatus.CANCELED if trial.state.is_finished() else TrialStatus.RUNNING).value
            )
            value = trial.values[0] if trial.values else _last(trial.intermediate_values)
            row = {
                "number": trial.number,
                "run_id": attrs.get("run_id"),
                "status": status,
                "early_terminated": bool(attrs.get("early_terminated")),
                "params": attrs.get("values", {}),
                "value": value,
                "step": max(trial.intermediate_values, default=None),
                "curve": [trial.intermediate_values[step] for step in sorted(trial.intermediate_values)],
                "message": attrs.get("message"),
            }
            if self.sweep.multi:
                row["values"] = dict(zip(metrics, trial.values or [None] * len(metrics)))
            # told without values (failed, pruned) in a multi-objective study: the run says what it reported
            unseen = "status" not in attrs or (self.sweep.multi and not trial.values)
            rows.append(as_run_says(self.home, self.sweep.sweep_id, row, metrics) if unseen else row)
        return rows

    def best(self, trials: list[dict], front: list[int] | None = None) -> dict | None:
        """The best completed trial; of a multi-objective sweep, the Pareto front's trial best on
        the first objective (runner.sweep.pareto), with every objective's value. `front`: the
        sweep's front (self.front), where the caller has it already."""
        done = [t for t in trials if t["status"] == TrialStatus.COMPLETED.value and finite(t["value"])]
        if not done:
            return None
        if self.sweep.multi:
            front = self.front(trials) if front is None else front
            if not front:
                return None
            number = front[0]
            best = next(t for t in done if t["number"] == number)
            return {
                "number": number,
                "run_id": best["run_id"],
                "value": best["value"],
                "values": best["values"],
                "model_version": self.model_version,
            }
        pick = max if self.sweep.objective.goal == "maximize" else min
        best = pick(done, key=lambda t: (t["value"], -t["number"]) if pick is max else (t["value"], t["number"]))
        return {
            "number": best["number"],
            "run_id": best["run_id"],
            "value": best["value"],
            "model_version": self.model_version,
        }

    def front(self, trials: list[dict]) -> list[int]:
        """A multi-objective sweep's Pareto front: its completed trials that no other beats on every objective."""
        done = [t for t in trials if t["status"] == TrialStatus.COMPLETED.value]
        return pareto_front(
            points_of(done, self.sweep.metrics), [objective.goal for objective in self.sweep.objectives]
        )

    def document(self) -> dict:
        trials = self.trials()
        keys = ("number", "run_id", "status", "early_terminated", "params", "value") + (
            ("values", "message") if self.sweep.multi else ()
        )
        front = self.front(trials) if self.sweep.multi else None
        document = {
            "id": self.sweep.sweep_id,
            "status": self.status.value,
            "objective": self.sweep.described(),
            "trials": [{key: t[key] for key in keys} for t in trials],
            "best": self.best(trials, front),
            "name": self.sweep.study.user_attrs.get("name"),
            "created": self.created,
            "limit": self.sweep.limit,
            "curves": {
                str(t["number"]): t["curve"] for t in trials
            },  # the primary metric at each report (the release's plot)
        }
        if front is not None:
            document["pareto"] = front  # trial numbers, best on the first objective first
        if self.budget is not None:
            document["budget"] = self.budget
        return document

    def save(self) -> None:
        """Whole or not at all (written aside, then renamed); trials ending together write in turn."""
        path = self.root / "sweep.json"
        with self.lock, writing(path):
            staging = path.with_suffix(".json.tmp")
            staging.write_text(json.dumps(self.document(), indent=2) + "\n", encoding="utf-8")
            staging.replace(path)

    # --- what the user sees ------------------------------------------------------------------------
    def show_trial(self, logger: Logger, number: int, result) -> None:
        ended = (
            TrialStatus.FAILED.value if result.missing else f"{result.status}"
        )  # a missing objective: the trial failed
        # why a trial did not complete, in its run's one line (a Slurm array task that never started: its reason)
        said = result.missing or result.early_terminated or result.status != RunStatus.COMPLETED
        status = ended + (f" ({result.message})" if said and result.message else "")
        values = result.values or (result.value,)
        value = "".join(
            f"  {metric}={given:.6g}" for metric, given in zip(self.sweep.metrics, values) if given is not None
        )
        logger.info(
            f"trial {number} ({result.run_id}): {status}{value}", style="green" if ended == "Completed" else "yellow"
        )
        if logger.github:  # one group per trial in the job's log
            with logger.group(f"trial {number} ({result.run_id}): {result.status}"):
                logger.text(
                    self.trial_log(number).read_text(encoding="utf-8", errors="replace").rstrip("\n") or "(no output)"
                )

    def show_live(self, logger: Logger) -> None:
        """On a terminal: the trials as they go (status, step, the metric's last report), drawn in place."""
        trials = self.trials()
        metrics = list(self.sweep.metrics)
        ended = sum(1 for t in trials if t["status"] != TrialStatus.RUNNING.value)
        rows = [trial_row(t, step=True, metrics=metrics) for t in trials]
        logger.table(
            f"sweep {self.sweep.sweep_id}: {ended} of {self.sweep.limit} trials ended",
            ["trial", "run", "status", "step", *metrics, "params"],
            rows,
            live=True,
        )

    def report(self, logger: Logger) -> None:
        """The trials table; in Actions also the job summary (table + the primary metric per trial
        over steps as a mermaid chart) and the step's outputs."""
        document = self.document()
        metrics = list(self.sweep.metrics)
        metric = metrics[0]
        rows = [trial_row(trial, metrics=metrics, front=document.get("pareto", ())) for trial in document["trials"]]
        best = document["best"]
        highlight = next((n for n, t in enumerate(document["trials"]) if best and t["number"] == best["number"]), None)
        logger.table(
            f"sweep {self.sweep.sweep_id}: {document['status']}",
            ["trial", "run", "status", *metrics, "params"],
            rows,
            highlight,
            live=True,
        )
        if best:
            model = f", model {best['model_version']}" if best["model_version"] else ""
            logger.info(
                f"best: trial {best['number']} (run {best['run_id']}) {best_words(best, metrics)}{model}",
                style="bold green",
            )
        markdown = summary_markdown(document, metric)
        with writing(self.root / "summary.md"):
            (self.root / "summary.md").write_text(markdown, encoding="utf-8")  # the pull request's comment shows it
        logger.step_summary(markdown)
        logger.outputs(
            {
                "sweep-id": self.sweep.sweep_id,
                "status": document["status"],
                "run-id": best["run_id"] if best else "",
                "primary-metric": "" if not best else str(best["value"]),
                "model-version": (best or {}).get("model_version") or "",
            }
        )

    def finish(self, canceled: bool, budget_stop: str | None = None, budget_passed: str | None = None) -> SweepStatus:
        """Canceled (by a signal), else, when a trial completed with a value, OverBudget (its trials
        spent more than the budget: `budget_passed`), StoppedByBudget (the budget stopped it:
        `budget_stop`) or Completed, else Failed; the best trial's model registered."""
        trials = self.trials()
        best = self.best(trials)
        self.budget = budget_passed or budget_stop
        if canceled:
            self.status = SweepStatus.CANCELED
        elif not best:
            self.status = SweepStatus.FAILED
        elif budget_passed:
            self.status = SweepStatus.OVER_BUDGET
        else:
            self.status = SweepStatus.STOPPED_BY_BUDGET if budget_stop else SweepStatus.COMPLETED
        if best is not None:
            try:
                self.model_version = self._register(best, trials)
            except FatalError as exc:  # the gate refused the best model, or the registry did: the book is still written
                self.refused = exc
        self.save()
        return self.status

    def _register(self, best: dict, trials: list[dict]) -> str | None:
        """The best trial's model, the next version of the model, with its params in the version's info."""
        from runner.history.registration import register_finished

        if not self.register or not best.get("run_id"):
            return None
        params = next(t["params"] for t in trials if t["number"] == best["number"])
        sweep = {"id": self.sweep.sweep_id, "trial": best["number"], "params": params, "value": best["value"]}
        # the front's trial best on the first objective: every objective's value, and why it is the one
        if self.sweep.multi:
            sweep.update(values=best["values"], chosen=f"on the Pareto front, the best on {self.sweep.metrics[0]}")
        extras = self.evidence(best["run_id"]) if self.evidence else None
        return register_finished(self.home, best["run_id"], {"sweep": sweep}, self.gate, extras)


def _last(values: dict) -> float | None:
    return values[max(values)] if values else None


def sweep_summary(home: Path, record: dict) -> str | None:
    """The summary of the sweep a run was a trial of (its trials table), if it has one."""
    sweep = record.get("sweep") or {}
    path = sweeps_root(home) / str(sweep.get("id")) / "summary.md"
    return path.read_text(encoding="utf-8") if sweep and path.is_file() else None


def read_sweep(home: Path, sweep_id: str) -> dict:
    """sweep.json, each trial's status as its run in this home says (the file may be older than the
    runs: a sweep whose storage went away could not write it again)."""
    document = read_json(sweeps_root(home) / sweep_id / "sweep.json")  # BadRecord is a ValueError
    trials = document.get("trials") if isinstance(document, dict) else None
    if not isinstance(trials, list) or not all(isinstance(t, dict) for t in trials):
        raise ValueError(f"{sweeps_root(home) / sweep_id / 'sweep.json'} is not a sweep's record")
    try:
        metrics = objective_metrics(document)
    except ValueError as exc:
        raise ValueError(f"{sweeps_root(home) / sweep_id / 'sweep.json'} is not a sweep's record: {exc}") from None
    document["trials"] = [as_run_says(home, sweep_id, trial, tuple(metrics)) for trial in trials]
    return document


def as_run_says(home: Path, sweep_id: str, trial: dict, metrics: tuple[str, ...]) -> dict:
    """A trial's row with the status, early termination and value its run's record gives, where
    the run is this home's and has ended: the run record is what happened, and the sweep's table
    never says Canceled of a run `tftrain runs` shows Completed."""
    from runner.sweep.outcome import TrialResult
    from runner.sweep.study import run_record

    run_id, number = trial.get("run_id"), trial.get("number")
    record = (
        run_record(home, run_id, sweep_id, number)
        if isinstance(run_id, str) and isinstance(number, int) and metrics
        else None
    )
    if record is None or not record.finished:
        return trial
    result = TrialResult.of_record(number, record, metrics)
    value = trial.get("value") if result.value is None else result.value
    said = {"status": result.shown_status.value, "early_terminated": result.early_terminated, "value": value}
    if result.values:  # a multi-objective sweep's: every objective's value, as the run recorded it
        said["values"] = dict(zip(metrics, result.values))
    return {**trial, **said}
