"""Hostile sweeps, in process: a resumed or joined sweep never replays its sampler's sequence (every
sampling), a 19,900-value choice is checked in one pass and reported in one line, a password from
$NAME holding @ : / # stays one password, a database error under a sweep is one StorageError line."""

from __future__ import annotations

import sqlite3

import pytest
from manifest_errors import error_of

from runner.errors import StorageError
from runner.manifest.sweep import Objective, Sampling, SweepSpec
from runner.manifest.sweep_rules import _choices
from runner.sweep.samplers import sampler_for
from runner.sweep.space import SearchSpace
from runner.sweep.storage import StoragePlace, place_of
from runner.sweep.study import SEED, open_sweep, storage_url

CONTINUOUS = {
    "--lr": {"type": "loguniform", "min_value": -9.0, "max_value": -1.0},
    "--momentum": {"type": "uniform", "min_value": 0.0, "max_value": 1.0},
    "--opt": {"type": "choice", "values": ["adam", "sgd", "rmsprop"]},
}
GRID = {"--opt": {"type": "choice", "values": ["adam", "sgd", "rmsprop"]}, "--layers": {"type": "randint", "upper": 4}}


@pytest.fixture
def optuna():
    import optuna  # the test extra installs it: a missing optuna fails here, never skips

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def space_of(expressions: dict) -> SearchSpace:
    return SearchSpace(SweepSpec.model_validate({"search_space": expressions}).search_space)


def run_trials(optuna, study, space: SearchSpace, count: int) -> list[dict]:
    """Ask, draw and tell `count` trials as the sweep does (a value that depends on the draw, so TPE learns)."""
    drawn = []
    for _ in range(count):
        trial = study.ask()
        values = space.suggest(trial)
        drawn.append(values)
        study.tell(trial, float(len(repr(values)) % 7) + trial.number / 100)
    return drawn


def interrupted(optuna, sampling: Sampling, space: SearchSpace, before: int, after: int) -> list[dict]:
    """`before` trials, then a new sampler (a resumed sweep: a new process, the sweep's seed), `after` more."""
    study = optuna.create_study(sampler=sampler_for(sampling, space, seed=11))
    drawn = run_trials(optuna, study, space, before)
    study.sampler = sampler_for(sampling, space, seed=11)
    return drawn + run_trials(optuna, study, space, after)


def key(values: dict) -> str:
    return repr(sorted((name, type(value).__name__, value) for name, value in values.items()))


SAMPLINGS = [
    Sampling(type="random", seed=3),
    Sampling(type="random"),  # no seed: the sweep draws one and keeps it
    Sampling(type="bayesian", seed=3),
]


@pytest.mark.parametrize("sampling", SAMPLINGS, ids=["random", "random-unseeded", "bayesian"])
def test_a_resumed_sweep_goes_on_with_the_sequence_and_never_replays_it(optuna, sampling):
    space = space_of(CONTINUOUS)
    # 14 trials: TPE's first 10 are its random start-up, the last ones its model's
    whole = run_trials(optuna, optuna.create_study(sampler=sampler_for(sampling, space, seed=11)), space, 14)
    resumed = interrupted(optuna, sampling, space, before=3, after=11)
    assert resumed == whole  # as if it had never stopped
    lrs = [values["--lr"] for values in resumed]
    assert len(set(lrs)) == len(lrs)  # no value drawn twice (a replay repeats them exactly)


@pytest.mark.integration  # QMCSampler imports scipy, whose import runs lscpu: a process (see test_space.py)
def test_a_resumed_sobol_sweep_goes_on_with_its_sequence(optuna):
    sampling, space = Sampling(type="random", rule="sobol", seed=3), space_of(CONTINUOUS)
    whole = run_trials(optuna, optuna.create_study(sampler=sampler_for(sampling, space, seed=11)), space, 9)
    resumed = interrupted(optuna, sampling, space, before=3, after=6)
    assert resumed == whole
    assert len({values["--momentum"] for values in resumed}) == 9


def test_a_resumed_grid_never_draws_a_point_it_holds(optuna):
    space = space_of(GRID)
    drawn = interrupted(optuna, Sampling(type="grid"), space, before=5, after=7)
    assert sorted(map(key, drawn)) == sorted(map(key, space.grid()))  # all 12 points, each once


def test_runners_of_one_sweep_share_its_seed_from_the_study(optuna, tmp_path):
    """A sweep made without a seed keeps the one it drew: resume draws with it, whatever the manifest says."""
    spec = SweepSpec.model_validate({"search_space": CONTINUOUS, "limits": {"max_total_trials": 9}})
    objective = Objective(primary_metric="score", goal="maximize")
    first = open_sweep(spec, "demo", objective, 9, tmp_path, {})
    drawn = run_trials(optuna, first.study, first.space, 3)
    seed = first.study.user_attrs[SEED]
    again = open_sweep(spec, "demo", objective, 9, tmp_path, {}, sweep_id=first.sweep_id, create=False)
    assert again.study.user_attrs[SEED] == seed
    drawn += run_trials(optuna, again.study, again.space, 3)
    alone = optuna.create_study(sampler=sampler_for(spec.sampling, first.space, seed=seed))
    assert drawn == run_trials(optuna, alone, first.space, 6)


def test_a_choice_of_19900_values_is_checked_in_one_pass():
    values = list(range(19_900))
    spec = SweepSpec.model_validate(
        {"search_space": {"--n": {"type": "choice", "values": values}}, "limits": {"max_total_trials": 3}}
    )
    compared = []

    class Counted(int):
        """Counts how often the check compares a value: a quadratic check compares ~2e8 times."""

        def __eq__(self, other):
            compared.append(1)
            return int.__eq__(self, other)

        __hash__ = int.__hash__

    spec.search_space["--n"].values[:] = [Counted(v) for v in values]
    assert _choices(spec) == []
    SearchSpace(spec.search_space)
    assert len(compared) < 2 * len(values)


def test_19900_copies_of_one_value_are_one_line_with_a_count(project):
    manifest = (
        "metrics: {primary: acc}\nsweep:\n  search_space:\n    --n: {type: choice, values: ["
        + ", ".join(["7"] * 19_900)
        + "]}\n"
    )
    message = error_of(project, manifest + "  limits: {max_total_trials: 3}\n")
    assert (
        message
        == "7: sweep.search_space.--n.values[1]: 7 is already value 0 of the choice (19899 values of the choice repeat"
        " an earlier one)"
    )


def test_a_long_repeated_value_is_shortened_in_its_line(project):
    long = "x" * 5000
    message = error_of(
        project,
        f"metrics: {{primary: acc}}\nsweep:\n  search_space:\n    --n: {{type: choice, values: [{long}, {long}]}}\n "
        " limits: {max_total_trials: 3}\n",
    )
    assert "\n" not in message and len(message) < 200 and "is already value 0 of the choice" in message


HOSTILE_PASSWORD = "p@ss:w/rd#1?&=%+ x"


def test_a_password_from_the_environment_is_quoted_where_the_url_is_assembled():
    environ = {"SWEEP_DB_PASSWORD": HOSTILE_PASSWORD, "SWEEP_DB_USER": "ops@team", "SWEEP_DB_HOST": "db.internal"}
    url = storage_url(
        "postgresql://${SWEEP_DB_USER}:$SWEEP_DB_PASSWORD@$SWEEP_DB_HOST:5432/sweeps?sslmode=disable&password=$SWEEP_DB_PASSWORD",
        environ,
    )
    assert (
        url == "postgresql://ops%40team:p%40ss%3Aw%2Frd%231%3F%26%3D%25%2B%20x@db.internal:5432/sweeps"
        "?sslmode=disable&password=p%40ss%3Aw%2Frd%231%3F%26%3D%25%2B%20x"
    )
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == (
        "ops@team",
        HOSTILE_PASSWORD,
        "db.internal",
        5432,
        "sweeps",
    )
    assert parsed.query == {"sslmode": "disable", "password": HOSTILE_PASSWORD}
    place = place_of(url, None)
    assert place.where == "ops@team@db.internal:5432/sweeps" and place.password == HOSTILE_PASSWORD


def test_a_path_from_the_environment_stays_a_path(tmp_path):
    assert (
        storage_url("sqlite:///$SWEEP_DIR/sweeps.db", {"SWEEP_DIR": str(tmp_path / "a b")})
        == f"sqlite:///{tmp_path}/a b/sweeps.db"
    )


def test_a_whole_url_from_the_environment_is_taken_as_written():
    assert (
        storage_url("$SWEEP_DB_URL", {"SWEEP_DB_URL": "postgresql://u:p%40ss@h:5432/db"})
        == "postgresql://u:p%40ss@h:5432/db"
    )


def test_a_hostile_sweep_json_is_no_sweep_record(tmp_path):
    from runner.sweep.book import read_sweep, sweeps_root

    folder = sweeps_root(tmp_path) / "demo-sweep-1"
    folder.mkdir(parents=True)
    for text in ("[]", '{"trials": {}}', '{"trials": [1, null], "objective": {}}', '{"trials": [], "objective": null}'):
        (folder / "sweep.json").write_text(text)
        with pytest.raises(ValueError, match="is not a sweep's record"):  # what `tftrain sweeps` skips
            read_sweep(tmp_path, "demo-sweep-1")


def test_an_unset_variable_is_one_storage_error():
    with pytest.raises(StorageError, match=r"^sweep.storage: \$NOT_SET_ANYWHERE is not set in tftrain's environment$"):
        storage_url("postgresql://u:$NOT_SET_ANYWHERE@h/db", {})


def test_a_database_error_under_optuna_is_one_storage_error_naming_the_storage(optuna):
    """Optuna wraps the driver's error in StorageInternalError, whose text names neither the storage nor the cause."""
    import sqlalchemy.exc

    place = StoragePlace("tftrain@127.0.0.1:5432/sweeps", "s3cr3t")
    driver = sqlalchemy.exc.OperationalError(
        "UPDATE trials …",
        {},
        Exception(
            'connection to server at "127.0.0.1", port 5432 failed: Connection refused (s3cr3t)\nIs the server running?'
        ),
    )
    with pytest.raises(StorageError) as caught:
        with place.failures():
            try:
                raise driver
            except sqlalchemy.exc.SQLAlchemyError as exc:
                raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
    assert str(caught.value) == "sweep storage tftrain@127.0.0.1:5432/sweeps: Connection refused (***)"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(StorageError, match="database is locked"), StoragePlace("/home/sweeps.db").failures():
        raise sqlite3.OperationalError("database is locked")
    with pytest.raises(KeyError), place.failures():  # not the storage's: left as it is
        raise KeyError("x")


def write_run(
    home, run_id: str, status: str, message: str | None = None, score: float | None = None, trial: int = 0
) -> None:
    from runner.history.record import MetricsSummary, RunRecord

    metrics = (
        MetricsSummary.model_validate(
            {"metrics": {"score": {"last": score, "best": score, "count": 1, "goal": "maximize"}}}
        )
        if score is not None
        else None
    )
    record = RunRecord(
        run_id=run_id,
        name="demo",
        status=status,
        created=1.0,
        ended=2.0,
        message=message,
        manifest={},
        metrics=metrics,
        sweep={"id": "demo-sweep-1", "trial": trial},
    )
    (home / "runs" / run_id).mkdir(parents=True)
    (home / "runs" / run_id / "run.json").write_text(record.model_dump_json())


def test_resume_tells_the_study_what_the_runs_did_and_the_table_agrees_with_them(optuna, tmp_path):
    """Runs that ended while the study could not be told (its storage was down): the run record is
    the truth; the study and the sweep's table follow it, and only the stopped trial runs again."""
    from runner.sweep.book import SweepBook, read_sweep
    from runner.sweep.study import RESUMES, queue_stopped_trials

    spec = SweepSpec.model_validate({"search_space": CONTINUOUS, "limits": {"max_total_trials": 9}})
    sweep = open_sweep(spec, "demo", Objective(primary_metric="score", goal="maximize"), 9, tmp_path, {})
    ends = [
        ("demo-1", "Completed", None, 0.75),
        ("demo-2", "Canceled", "the sweep's storage failed", None),
        ("demo-3", "Canceled", "early termination at step 2", 0.1),
        ("demo-4", "TimedOut", "max_run_duration_seconds (2s) reached", 0.2),
        ("../../etc", "Completed", None, 0.9),
        ("demo-6", "Failed", "lost: tftrain process 12 ended", None),
        ("demo-7", "Failed", "training exited with 1", None),
    ]
    for run_id, status, message, score in ends:
        trial = sweep.study.ask()
        trial.set_user_attr("values", sweep.space.suggest(trial))
        trial.set_user_attr("run_id", run_id)
        if not run_id.startswith("."):
            write_run(tmp_path, run_id, status, message, score, trial=trial.number)
    trial = sweep.study.ask()  # another runner's trial whose run id this home also has, for a trial of its own
    trial.set_user_attr("run_id", "demo-1")
    book = SweepBook(tmp_path, sweep, register=False)
    stale = book.document()  # what sweep.json held when the storage went away: all Running
    assert {t["status"] for t in stale["trials"][:4]} == {"Completed", "Canceled"}  # the table already reads the runs
    queued = queue_stopped_trials(sweep, tmp_path)
    assert queued == [(1, "demo-2"), (5, "demo-6")]  # stopped from outside, and lost with its tftrain: run again
    states = {t.number: t.state.name for t in sweep.study.get_trials(deepcopy=False)}
    assert [states[n] for n in range(8)] == [
        "COMPLETE",
        "FAIL",
        "PRUNED",
        "FAIL",
        "RUNNING",
        "FAIL",
        "FAIL",
        "RUNNING",
    ]  # 4, 7: not runs of this home
    assert sweep.study.trials[0].value == 0.75
    assert [t.user_attrs[RESUMES] for t in sweep.study.trials if t.state.name == "WAITING"] == ["demo-2", "demo-6"]
    rows = {row["number"]: row for row in book.trials()}
    assert [rows[n]["status"] for n in (0, 1, 2, 3, 5, 6)] == [
        "Completed",
        "Canceled",
        "Canceled",
        "Canceled",
        "Failed",
        "Failed",
    ]
    assert rows[2]["early_terminated"] and not rows[3]["early_terminated"]
    book.save()
    shown = {t["number"]: t["status"] for t in read_sweep(tmp_path, sweep.sweep_id)["trials"]}
    assert [shown[n] for n in range(4)] == ["Completed", "Canceled", "Canceled", "Canceled"]


def test_a_stale_sweep_json_shows_what_the_runs_did(tmp_path):
    import json

    from runner.sweep.book import read_sweep, sweeps_root

    write_run(tmp_path, "demo-1", "Completed", score=0.5)
    folder = sweeps_root(tmp_path) / "demo-sweep-1"
    folder.mkdir(parents=True)
    trial = {
        "number": 0,
        "run_id": "demo-1",
        "status": "Running",
        "early_terminated": False,
        "params": {},
        "value": None,
    }
    (folder / "sweep.json").write_text(
        json.dumps({"id": "demo-sweep-1", "objective": {"primary_metric": "score"}, "trials": [trial]})
    )
    (shown,) = read_sweep(tmp_path, "demo-sweep-1")["trials"]
    assert (shown["status"], shown["value"]) == ("Completed", 0.5)
