"""The sweep's Optuna study: created (a new sweep id), loaded (join, resume), seeded from earlier
sweeps (warm_start), and the trials that count toward max_total_trials."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from runner.errors import StorageError, SweepError, extra_module
from runner.manifest.sweep import Objective, SweepSpec
from runner.sweep.policies import pruner_for
from runner.sweep.space import SearchSpace, sampler_for
from runner.sweep.storage import storage_for

SWEEP_MARK = "-sweep-"
WARM = "warm_start_from"  # user attribute of a trial copied from an earlier sweep
RESUMES = "resumes_run"  # user attribute of a trial that re-runs a canceled one from its checkpoint
CANCELED_BY_SIGNAL = "canceled"  # user attribute "stopped": the trial was stopped with the sweep, not by the policy
ABANDONED = "abandoned"  # study attribute: trials whose tftrain was killed (closed by resume)


@dataclass
class Sweep:
    """One sweep, as this process takes part in it."""

    sweep_id: str
    study: object  # optuna.Study
    space: SearchSpace
    objective: Objective
    limit: int  # max_total_trials (or the grid's size)

    def counted(self) -> int:
        """Trials of this sweep toward the limit: not copied from earlier sweeps, not the ones a
        signal stopped (`tftrain sweep resume` runs those again), and queued ones (resume's,
        WAITING) only once a worker takes them."""
        abandoned = set(self.study.user_attrs.get(ABANDONED, []))
        return sum(
            1 for trial in self.study.get_trials(deepcopy=False)
            if trial.state.name != "WAITING" and WARM not in trial.user_attrs and not self.stopped(trial, abandoned)
        )

    def stopped(self, trial, abandoned: set[int] | None = None) -> bool:
        """Stopped by a signal to its sweep, or left Running by a tftrain that is gone."""
        if abandoned is None:
            abandoned = set(self.study.user_attrs.get(ABANDONED, []))
        return trial.user_attrs.get("stopped") == CANCELED_BY_SIGNAL or trial.number in abandoned


def optuna_module():
    optuna = extra_module("optuna", "sweep", "sweep:")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our table says what happens, not optuna's lines
    return optuna


def open_sweep(
    spec: SweepSpec, name: str, objective: Objective, limit: int, home: Path, sweep_id: str | None = None, create: bool = True
) -> Sweep:
    """A new sweep (sweep_id None: the next NAME-sweep-N), or `sweep_id` in the manifest's storage:
    joined, or created under that id when `create` (a matrix of jobs that all run `tftrain sweep
    join ID`: the first creates it). `tftrain sweep resume` never creates."""
    optuna = optuna_module()
    storage = storage_for(storage_url(spec.storage), home)
    space = SearchSpace(spec.search_space)
    sampler, pruner = sampler_for(spec.sampling, space), pruner_for(spec.early_termination, objective.goal)
    if sweep_id is None:
        sweep_id = _next_id(optuna, storage, name)
    elif sweep_id in optuna.get_all_study_names(storage) or not create:
        return _joined(optuna, storage, spec, sweep_id, sampler, pruner, space, objective, limit)
    try:
        study = optuna.create_study(study_name=sweep_id, storage=storage, direction=objective.goal, sampler=sampler, pruner=pruner)
    except optuna.exceptions.DuplicatedStudyError:  # another job of the matrix made it first
        return _joined(optuna, storage, spec, sweep_id, sampler, pruner, space, objective, limit)
    study.set_user_attr("objective", objective.model_dump())
    study.set_user_attr("name", name)
    sweep = Sweep(sweep_id, study, space, objective, limit)
    _warm_start(optuna, sweep, spec.warm_start, storage)
    return sweep


def _joined(optuna, storage, spec: SweepSpec, sweep_id: str, sampler, pruner, space: SearchSpace, objective: Objective, limit: int) -> Sweep:
    try:
        study = optuna.load_study(study_name=sweep_id, storage=storage, sampler=sampler, pruner=pruner)
    except KeyError:
        raise SweepError(f"sweep {sweep_id}: no such sweep in {_where(spec)}") from None
    if study.user_attrs.get("objective") not in (None, objective.model_dump()):
        raise SweepError(f"sweep {sweep_id}: its objective is {study.user_attrs['objective']}, the manifest's {objective.model_dump()}")
    return Sweep(sweep_id, study, space, objective, limit)


def storage_url(url: str | None) -> str | None:
    """`$NAME` / `${NAME}` in sweep.storage come from tftrain's environment (a password kept in a
    secret, not in the manifest); one that is not set is an error, never an empty password."""
    if url is None:
        return None

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in os.environ:
            raise StorageError(f"sweep.storage: ${name} is not set in tftrain's environment")
        return os.environ[name]

    return re.sub(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))", value, url)


def _where(spec: SweepSpec) -> str:
    return "the storage sweep.storage names" if spec.storage else "this TFTRAIN_HOME's sweeps.db"


def _next_id(optuna, storage, name: str) -> str:
    pattern = re.compile(re.escape(name + SWEEP_MARK) + r"(\d+)$")
    taken = [int(m.group(1)) for m in map(pattern.match, optuna.get_all_study_names(storage)) if m]
    return f"{name}{SWEEP_MARK}{max(taken, default=0) + 1}"


def _warm_start(optuna, sweep: Sweep, sources: list[str], storage) -> None:
    """Finished trials of earlier sweeps join this study as what the sampler knows (HyperDrive's
    resume_from); they are not this sweep's trials: not counted, never its best."""
    for source in sources:
        try:
            earlier = optuna.load_study(study_name=source, storage=storage)
        except KeyError:
            raise SweepError(f"sweep.warm_start: {source}: no such sweep") from None
        for trial in earlier.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            values = trial.user_attrs.get("values")
            if not isinstance(values, dict) or trial.value is None:
                continue
            try:
                params = sweep.space.internal(values)
            except ValueError:
                continue  # a value outside this sweep's space tells the sampler nothing about it
            sweep.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=sweep.space.distributions(),
                    value=trial.value,
                    user_attrs={"values": values, WARM: f"{source}#{trial.number}", "run_id": trial.user_attrs.get("run_id")},
                )
            )


def queue_stopped_trials(sweep: Sweep, home: Path) -> list[tuple[int, str]]:
    """Trials a signal stopped (not the policy), queued again with their values and their run as
    resume_from; each only once (the study remembers which). A trial still Running in the study
    whose run in this home has ended, or whose tftrain is gone (killed, the machine rebooted), was
    stopped too: it is closed as such first."""
    _close_abandoned(sweep, home)
    resumed = set(sweep.study.user_attrs.get("resumed", []))
    queued = []
    for trial in sweep.study.get_trials(deepcopy=False):
        run_id = trial.user_attrs.get("run_id")
        if not sweep.stopped(trial) or trial.number in resumed or not run_id:
            continue
        values = trial.user_attrs.get("values", {})
        sweep.study.enqueue_trial(sweep.space.internal(values), user_attrs={RESUMES: run_id, "values": values})
        resumed.add(trial.number)
        queued.append((trial.number, run_id))
    sweep.study.set_user_attr("resumed", sorted(resumed))
    return queued


def _close_abandoned(sweep: Sweep, home: Path) -> None:
    from runner.history.index import Owner
    from runner.history.record import RunRecord

    for trial in sweep.study.get_trials(deepcopy=False):
        run_id = trial.user_attrs.get("run_id")
        if trial.state.name != "RUNNING" or not run_id:
            continue
        try:
            record = RunRecord.read(home / "runs" / run_id / "run.json")
        except (OSError, ValueError):
            continue  # not a run of this home: another runner's, judged there
        owner = Owner.of(record.owner)
        if record.finished or (owner is not None and owner.gone()):
            sweep.study.tell(trial.number, state=optuna_module().trial.TrialState.FAIL)
            abandoned = set(sweep.study.user_attrs.get(ABANDONED, []))
            sweep.study.set_user_attr(ABANDONED, sorted(abandoned | {trial.number}))
