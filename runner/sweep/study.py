"""The sweep's Optuna study: created (a new sweep id), loaded (join, resume), seeded from earlier
sweeps (warm_start), and the trials that count toward max_total_trials."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from runner.errors import StorageError, SweepError, extra_module
from runner.manifest.sweep import Objective, SweepSpec
from runner.sweep.policies import pruner_for
from runner.sweep.samplers import new_seed, sampler_for
from runner.sweep.space import SearchSpace
from runner.sweep.storage import StoragePlace, place_of, storage_for

SWEEP_MARK = "-sweep-"
WARM = "warm_start_from"  # user attribute of a trial copied from an earlier sweep
RESUMES = "resumes_run"  # user attribute of a trial that re-runs a canceled one from its checkpoint
CANCELED_BY_SIGNAL = "canceled"  # user attribute "stopped": the trial was stopped with the sweep, not by the policy
ABANDONED = "abandoned"  # study attribute: trials whose tftrain was killed (closed by resume)
SEED = "seed"  # study attribute: the sweep's seed, shared by every runner of the sweep (samplers.py)
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass
class Sweep:
    """One sweep, as this process takes part in it."""

    sweep_id: str
    study: object  # optuna.Study
    space: SearchSpace
    objectives: tuple[
        Objective, ...
    ]  # every objective, the one trials are ranked by first; more than one: multi-objective
    limit: int  # max_total_trials (or the grid's size)
    place: StoragePlace  # how errors name its storage

    @property
    def objective(self) -> Objective:
        """The objective trials are ranked by (a multi-objective sweep's first)."""
        return self.objectives[0]

    @property
    def multi(self) -> bool:
        """A multi-objective sweep: its study has a direction per objective, its result a Pareto front."""
        return len(self.objectives) > 1

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(objective.primary_metric for objective in self.objectives)

    def described(self):
        """The objective as the manifest wrote it: a mapping, or a list of them (the study keeps it, sweep.json shows
        it)."""
        return [objective.model_dump() for objective in self.objectives] if self.multi else self.objective.model_dump()

    def counted(self) -> int:
        """Trials of this sweep toward the limit: not copied from earlier sweeps, not the ones a
        signal stopped (`tftrain sweep resume` runs those again), and queued ones (resume's,
        WAITING) only once a worker takes them."""
        abandoned = set(self.study.user_attrs.get(ABANDONED, []))
        return sum(
            1
            for trial in self.study.get_trials(deepcopy=False)
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
    spec: SweepSpec,
    name: str,
    objective: Objective | tuple[Objective, ...],
    limit: int,
    home: Path,
    environ: Mapping[str, str],
    sweep_id: str | None = None,
    create: bool = True,
) -> Sweep:
    """A new sweep (sweep_id None: the next NAME-sweep-N), or `sweep_id` in the manifest's storage:
    joined, or created under that id when `create` (a matrix of jobs that all run `tftrain sweep
    join ID`: the first creates it). `tftrain sweep resume` never creates. `environ`: tftrain's
    environment, for the $NAMEs in sweep.storage. `objective`: one, or a multi-objective sweep's all."""
    optuna = optuna_module()
    objectives = objective if isinstance(objective, tuple) else (objective,)
    url = storage_url(spec.storage, environ)
    storage, place = storage_for(url, home), place_of(url, home)
    space = SearchSpace(spec.search_space)
    pruner = pruner_for(spec.early_termination, objectives[0].goal)
    unopened = Sweep(sweep_id or "", None, space, objectives, limit, place)
    with place.failures():
        if sweep_id is None:
            sweep_id = unopened.sweep_id = _next_id(optuna, storage, name)
        elif sweep_id in optuna.get_all_study_names(storage) or not create:
            return _joined(optuna, storage, spec, sweep_id, pruner, unopened)
        seed = new_seed() if spec.sampling.seed is None else spec.sampling.seed
        try:
            study = optuna.create_study(
                study_name=sweep_id,
                storage=storage,
                directions=[o.goal for o in objectives],
                sampler=sampler_for(spec.sampling, space, seed),
                pruner=pruner,
            )
        except optuna.exceptions.DuplicatedStudyError:  # another job of the matrix made it first
            return _joined(optuna, storage, spec, sweep_id, pruner, unopened)
        study.set_user_attr(SEED, seed)
        study.set_user_attr("objective", unopened.described())
        study.set_user_attr("name", name)
        sweep = unopened
        sweep.study = study
        _warm_start(optuna, sweep, spec.warm_start, storage)
        return sweep


def _joined(optuna, storage, spec: SweepSpec, sweep_id: str, pruner, sweep: Sweep) -> Sweep:
    """The sweep as stored, drawing with the sweep's own seed (the manifest's only for a sweep made
    before the seed was kept): a runner that joins or resumes goes on with the sweep's sequence."""
    try:
        study = optuna.load_study(study_name=sweep_id, storage=storage, pruner=pruner)
    except KeyError:
        raise SweepError(f"sweep {sweep_id}: no such sweep in {_where(spec)}") from None
    if study.user_attrs.get("objective") not in (None, sweep.described()):
        raise SweepError(
            f"sweep {sweep_id}: its objective is {study.user_attrs['objective']}, the manifest's {sweep.described()}"
        )
    seed = study.user_attrs.get(SEED)
    if not isinstance(seed, int):
        seed = new_seed() if spec.sampling.seed is None else spec.sampling.seed
        study.set_user_attr(SEED, seed)
    study.sampler = sampler_for(spec.sampling, sweep.space, seed)
    sweep.study = study
    return sweep


def storage_url(url: str | None, environ: Mapping[str, str]) -> str | None:
    """`$NAME` / `${NAME}` in sweep.storage come from tftrain's environment, `environ` (a password kept in a
    secret, not in the manifest); one that is not set is an error, never an empty password. A value
    in the user part or the query is percent-encoded: a password holding @ : / # stays one password
    (the driver decodes it), never a host, a port or a fragment. In the host and path it goes in as
    it is (a directory of a sqlite:/// path)."""
    if url is None:
        return None
    head, separator, rest = url.partition("://")
    if not separator:
        return _substitute(url, environ, encode=False)
    authority_end = min((rest.find(mark) for mark in "/?#" if mark in rest), default=len(rest))
    authority, tail = rest[:authority_end], rest[authority_end:]
    user, at, host = authority.rpartition("@")
    path, question, query = tail.partition("?")
    return (
        _substitute(head, environ, encode=False)
        + separator
        + _substitute(user, environ, encode=True)
        + at
        + _substitute(host, environ, encode=False)
        + _substitute(path, environ, encode=False)
        + question
        + _substitute(query, environ, encode=True)
    )


def _substitute(text: str, environ: Mapping[str, str], encode: bool) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in environ:
            raise StorageError(f"sweep.storage: ${name} is not set in tftrain's environment")
        return quote(environ[name], safe="") if encode else environ[name]

    return VARIABLE.sub(value, text)


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
            if not isinstance(values, dict) or trial.values is None or len(trial.values) != len(sweep.objectives):
                continue  # an earlier sweep of another number of objectives tells this one nothing
            try:
                params = sweep.space.internal(values)
            except ValueError:
                continue  # a value outside this sweep's space tells the sampler nothing about it
            sweep.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=sweep.space.distributions(),
                    values=list(trial.values),
                    user_attrs={
                        "values": values,
                        WARM: f"{source}#{trial.number}",
                        "run_id": trial.user_attrs.get("run_id"),
                    },
                )
            )


def queue_stopped_trials(sweep: Sweep, home: Path) -> list[tuple[int, str | None]]:
    """Trials a signal stopped (not the policy), queued again with their values and their run as
    resume_from; each only once (the study remembers which). A stopped trial whose run never
    started is queued with its values alone: its point is not lost, and a grid never re-draws a
    point it holds. The study first catches up with the runs of this home (reconcile)."""
    reconcile(sweep, home)
    resumed = set(sweep.study.user_attrs.get("resumed", []))
    queued = []
    for trial in sweep.study.get_trials(deepcopy=False):
        values = trial.user_attrs.get("values")
        if not sweep.stopped(trial) or trial.number in resumed or not isinstance(values, dict):
            continue
        run_id = trial.user_attrs.get("run_id")
        attrs = {RESUMES: run_id, "values": values} if run_id else {"values": values}
        sweep.study.enqueue_trial(sweep.space.internal(values), user_attrs=attrs)
        resumed.add(trial.number)
        queued.append((trial.number, run_id))
    sweep.study.set_user_attr("resumed", sorted(resumed))
    return queued


def reconcile(sweep: Sweep, home: Path) -> None:
    """The study catches up with what happened: a trial it still holds Running whose run in this
    home has ended (its tftrain was killed, or the storage went away before it was told) is told
    what its run record says, the one truth of a trial's state: Completed with its value,
    stopped by the policy, failed; a run canceled from outside, or one whose tftrain is gone, is a
    stopped trial, run again. A run of another home is left to its own runner."""
    from runner.history.owner import Owner
    from runner.sweep.outcome import TrialResult, Verdict, tell

    optuna = optuna_module()
    for frozen in sweep.study.get_trials(deepcopy=False):
        run_id = frozen.user_attrs.get("run_id")
        if frozen.state.name != "RUNNING" or not run_id:
            continue
        record = run_record(home, run_id, sweep.sweep_id, frozen.number)
        if record is None:
            continue
        trial = optuna.trial.Trial(sweep.study, frozen._trial_id)
        if record.finished:
            verdict = tell(sweep.study, trial, TrialResult.of_record(frozen.number, record, sweep.metrics))
            if verdict == Verdict.STOPPED:
                _abandoned(sweep, frozen.number)
        elif (owner := Owner.of(record.owner)) is not None and owner.gone():
            sweep.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            _abandoned(sweep, frozen.number)


def run_record(home: Path, run_id: str, sweep_id: str, number: int):
    """The run record of trial `number`'s run in this home; None for another runner's (or an
    unreadable) one. The id comes from the study, which other runners write: one that is no run id
    names no file, and a run of this home that took the same id (each home counts its own) is
    another trial's unless its record names this sweep and trial."""
    from runner.history.record import RunRecord

    if not RUN_ID.fullmatch(run_id):
        return None
    try:
        record = RunRecord.read(home / "runs" / run_id / "run.json")
    except (OSError, ValueError):
        return None
    return record if record.sweep == {"id": sweep_id, "trial": number} else None


def _abandoned(sweep: Sweep, number: int) -> None:
    abandoned = set(sweep.study.user_attrs.get(ABANDONED, []))
    sweep.study.set_user_attr(ABANDONED, sorted(abandoned | {number}))
