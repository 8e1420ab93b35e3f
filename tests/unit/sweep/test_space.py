"""The search space: Azure ML's ten expressions on Optuna params, both ways, and the samplers."""

from __future__ import annotations

import math
import random
import statistics
import sys

import pytest
from pydantic import TypeAdapter

from runner.errors import MissingExtra
from runner.manifest.sweep import Expression, Sampling
from runner.sweep.samplers import sampler_for
from runner.sweep.space import SearchSpace

_EXPRESSION = TypeAdapter(Expression)


def expression(type: str, **fields) -> Expression:
    return _EXPRESSION.validate_python({"type": type, **fields})


def space_of(**expressions: dict) -> SearchSpace:
    """A space whose keys are flags: space_of(lr={...}) has the key --lr."""
    return SearchSpace({f"--{name}": expression(**fields) for name, fields in expressions.items()})


# one of each, with bounds that make every property below visible
ALL_TEN = {
    "choice": {"type": "choice", "values": ["adam", 1, True, 1.0, 0.5]},
    "randint": {"type": "randint", "upper": 7},
    "uniform": {"type": "uniform", "min_value": -2.0, "max_value": 3.0},
    "quniform": {"type": "quniform", "min_value": 0.5, "max_value": 9.5, "q": 0.25},
    "loguniform": {"type": "loguniform", "min_value": -9.0, "max_value": -1.0},
    "qloguniform": {"type": "qloguniform", "min_value": 0.0, "max_value": 5.0, "q": 0.1},
    "normal": {"type": "normal", "mu": 10.0, "sigma": 2.0},
    "qnormal": {"type": "qnormal", "mu": 0.0, "sigma": 3.0, "q": 0.5},
    "lognormal": {"type": "lognormal", "mu": 1.0, "sigma": 0.5},
    "qlognormal": {"type": "qlognormal", "mu": 2.0, "sigma": 0.3, "q": 0.01},
}


class Draws:
    """A trial whose every suggestion is a seeded uniform draw: thousands of trials without a study."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def suggest_float(self, name, low, high):
        return self.rng.uniform(low, high)

    def suggest_int(self, name, low, high):
        return self.rng.randint(low, high)

    def suggest_categorical(self, name, choices):
        return self.rng.choice(choices)


@pytest.fixture(scope="module")
def samples() -> dict[str, list]:
    """Four thousand draws of each of the ten expressions, by expression type."""
    space = space_of(**ALL_TEN)
    trial = Draws(14)
    draws = [space.suggest(trial) for _ in range(4000)]
    return {name: [draw[f"--{name}"] for draw in draws] for name in ALL_TEN}


@pytest.fixture
def optuna():
    import optuna  # the test extra installs it: a missing optuna fails here, never skips

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def multiple_of(value: float, q: float) -> bool:
    return math.isclose(value / q, round(value / q), abs_tol=1e-9)


def test_every_expression_gives_values_of_its_type(samples):
    assert {type(value) for value in samples["randint"]} == {int}
    for name in ("uniform", "quniform", "loguniform", "qloguniform", "normal", "qnormal", "lognormal", "qlognormal"):
        assert {type(value) for value in samples[name]} == {float}, name
    # 1, True and 1.0 are three values, each drawn as itself
    assert {(type(value), value) for value in samples["choice"]} == {
        (str, "adam"),
        (int, 1),
        (bool, True),
        (float, 1.0),
        (float, 0.5),
    }


def test_uniform_and_loguniform_stay_in_bounds_and_spread_evenly(samples):
    uniform = samples["uniform"]
    assert -2.0 <= min(uniform) < -1.9 and 2.9 < max(uniform) <= 3.0
    assert statistics.fmean(uniform) == pytest.approx(0.5, abs=0.1)
    exponents = [math.log(value) for value in samples["loguniform"]]  # bounds are exponents
    assert -9.0 - 1e-12 <= min(exponents) < -8.9 and -1.1 < max(exponents) <= -1.0 + 1e-12
    assert statistics.fmean(exponents) == pytest.approx(-5.0, abs=0.15)


def test_normal_and_lognormal_have_their_mean_and_deviation(samples):
    normal = samples["normal"]
    assert statistics.fmean(normal) == pytest.approx(10.0, abs=0.1)
    assert statistics.stdev(normal) == pytest.approx(2.0, rel=0.05)
    logs = [math.log(value) for value in samples["lognormal"]]
    assert statistics.fmean(logs) == pytest.approx(1.0, abs=0.03)
    assert statistics.stdev(logs) == pytest.approx(0.5, rel=0.05)
    qnormal = samples["qnormal"]
    assert statistics.fmean(qnormal) == pytest.approx(0.0, abs=0.15)
    assert statistics.stdev(qnormal) == pytest.approx(3.0, rel=0.05)
    qlogs = [math.log(value) for value in samples["qlognormal"]]
    assert statistics.fmean(qlogs) == pytest.approx(2.0, abs=0.02)


def test_q_expressions_are_multiples_of_q_within_the_rounded_range(samples):
    for name in ("quniform", "qloguniform", "qnormal", "qlognormal"):
        q = ALL_TEN[name]["q"]
        assert all(multiple_of(value, q) for value in samples[name]), name
    assert set(samples["quniform"]) == {0.5 + 0.25 * step for step in range(37)}
    assert min(samples["qloguniform"]) >= 1.0 and max(samples["qloguniform"]) <= 148.4  # round(exp(0..5)/0.1)*0.1
    # rounded to q's decimals: what the script reads is 0.3, never 0.30000000000000004
    assert all(len(repr(value).partition(".")[2]) <= 2 for value in samples["qlognormal"])


def test_randint_covers_zero_to_upper_minus_one_and_nothing_else(samples):
    assert set(samples["randint"]) == set(range(7))


def test_values_and_params_round_trip_for_all_ten(samples):
    space = space_of(**ALL_TEN)
    trial = Draws(3)
    for _ in range(300):
        values = space.suggest(trial)
        back = space.values_of(space.internal(values))
        assert back == values
        assert [type(value) for value in back.values()] == [type(value) for value in values.values()]


def test_warm_start_enqueues_values_that_the_next_trial_gets_back(optuna):
    space = space_of(**ALL_TEN)
    earlier = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    wanted = []
    for _ in range(20):
        trial = earlier.ask()
        space.suggest(trial)
        earlier.tell(trial, 0.0)
        wanted.append(space.values_of(trial.params))
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=5))
    for values in wanted:
        study.enqueue_trial(space.internal(values))
    got = [space.suggest(study.ask()) for _ in wanted]
    assert got == wanted
    assert [[type(value) for value in values.values()] for values in got] == [
        [type(value) for value in values.values()] for values in wanted
    ]


def test_params_read_naturally(optuna):
    space = space_of(
        optimizer={"type": "choice", "values": ["adam", "sgd"]},
        lr={"type": "uniform", "min_value": 0.0, "max_value": 1.0},
    )
    trial = optuna.create_study().ask()
    values = space.suggest(trial)
    assert trial.params == values  # one param per key, named by it; a plain choice's param is its value


def test_values_out_of_reach_are_refused_naming_the_key():
    space = space_of(**ALL_TEN)
    good = space.values_of(space.internal(space.suggest(Draws(1))))
    wrong = {
        "--choice": [False, "Adam", 2, 0.25],
        "--randint": [7, -1, 2.0, True],
        "--uniform": [3.5, -2.1, "1"],
        "--quniform": [0.3, 0.0, 10.0],  # not a multiple of 0.25; outside round(uniform(0.5, 9.5) / q) * q
        "--loguniform": [0.5, 1e-5, 0.0, -1.0],
        "--qloguniform": [0.05, 150.0, 1.23],
        "--normal": [10.0 + 2.0 * 8],  # past the clipped tail
        "--qnormal": [0.25],
        "--lognormal": [0.0, -1.0],
        "--qlognormal": [7.385],
    }
    for key, values in wrong.items():
        for value in values:
            with pytest.raises(ValueError, match=f"^{key}: "):
                space.internal({**good, key: value})
    missing = dict(good)
    del missing["--uniform"]
    with pytest.raises(ValueError, match="^--uniform: no value"):
        space.internal(missing)
    with pytest.raises(ValueError, match="^--extra: not in the search space"):
        space.internal({**good, "--extra": 1})


def test_a_choice_tells_every_float_apart():
    space = space_of(x={"type": "choice", "values": [0.0, -0.0, math.nan, math.inf, 1]})
    for values in space.grid():
        assert repr(space.values_of(space.internal(values))) == repr(values)


def test_values_of_leaves_out_keys_a_trial_never_asked_for():
    space = space_of(**ALL_TEN)
    params = space.internal(space.suggest(Draws(2)))
    del params["--normal"]
    assert set(space.values_of(params)) == set(params)


@pytest.mark.parametrize("name", ["uniform", "quniform", "loguniform", "qloguniform"])
def test_empty_ranges_are_refused_naming_the_key(name):
    fields = {**ALL_TEN[name], "min_value": 2.0, "max_value": 2.0}
    with pytest.raises(ValueError, match=f"^--x: {name} needs min_value < max_value"):
        space_of(x=fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "loguniform", "min_value": 0.0, "max_value": 710.0},
        {"type": "lognormal", "mu": 700.0, "sigma": 10.0},
        {"type": "normal", "mu": 1e308, "sigma": 1e308},
        {"type": "quniform", "min_value": 0.0, "max_value": 1e300, "q": 1e-300},
    ],
)
def test_expressions_beyond_a_floats_range_are_refused_naming_the_key(fields):
    with pytest.raises(ValueError, match="^--x: .* beyond a float's range"):
        space_of(x=fields)


def test_the_grid_is_every_combination_in_key_order():
    space = space_of(flag={"type": "choice", "values": [True, 1, "1"]}, layers={"type": "randint", "upper": 3})
    grid = space.grid()
    assert len(grid) == 9
    assert grid[:3] == [{"--flag": True, "--layers": layer} for layer in range(3)]
    assert [(type(point["--flag"]), point["--flag"]) for point in grid[::3]] == [(bool, True), (int, 1), (str, "1")]


@pytest.mark.parametrize("name", [name for name in ALL_TEN if name not in ("choice", "randint")])
def test_the_grid_refuses_continuous_expressions_naming_key_and_type(name):
    space = space_of(layers=ALL_TEN["randint"], x=ALL_TEN[name])
    with pytest.raises(ValueError, match=f"^--x: grid sampling .* not {name}$"):
        space.grid()
    with pytest.raises(ValueError, match=f"^--x: grid sampling .* not {name}$"):
        sampler_for(Sampling(type="grid"), space)


def test_a_grid_too_large_to_enumerate_is_refused():
    space = space_of(a={"type": "randint", "upper": 1 << 53})
    with pytest.raises(ValueError, match="more than"):
        space.grid()


def test_the_grid_sampler_visits_every_combination_once(optuna):
    space = space_of(
        mixed={"type": "choice", "values": [1, True, 1.0]},
        opt={"type": "choice", "values": ["adam", "sgd"]},
        n=ALL_TEN["randint"],
    )
    study = optuna.create_study(sampler=sampler_for(Sampling(type="grid", seed=2), space))
    seen = []
    for _ in range(len(space.grid())):
        trial = study.ask()
        seen.append(space.suggest(trial))
        study.tell(trial, 0.0)
    key = lambda values: sorted((name, type(value).__name__, value) for name, value in values.items())  # noqa: E731
    assert sorted(map(key, seen)) == sorted(map(key, space.grid()))
    # past the grid's end, a tell stays a tell (GridSampler's own calls study.stop(), which raises outside optimize)
    trial = study.ask()
    space.suggest(trial)
    study.tell(trial, 0.0)


def sequence(optuna, sampling: Sampling, space: SearchSpace, count: int = 12) -> list[dict]:
    study = optuna.create_study(sampler=sampler_for(sampling, space))
    values = []
    for index in range(count):
        trial = study.ask()
        values.append(space.suggest(trial))
        study.tell(trial, float(index % 5))
    return values


# Sampling from QMCSampler imports scipy, whose numpy.testing import runs lscpu: a process, which
# tests/purity.py keeps out of the unit suite. (A mark on one parameter of a parametrized test does not
# do: conftest.py adds the purity fixture to the fixture list that all the parameters share.)
SCIPY_STARTS_A_PROCESS = pytest.mark.integration


@pytest.mark.parametrize(
    "sampling, sampler",
    [
        (Sampling(type="random", seed=7), "RandomSampler"),
        (Sampling(type="bayesian", seed=7), "TPESampler"),
        (Sampling(type="grid", seed=7), "GridSampler"),
    ],
)
def test_each_sampling_has_its_sampler_and_a_seed_repeats_its_sequence(optuna, sampling, sampler):
    if sampling.type == "grid":  # a grid takes choice and randint only
        space = space_of(a={"type": "choice", "values": ["x", "y", "z"]}, b={"type": "randint", "upper": 4})
    else:
        space = space_of(**ALL_TEN)
    made = sampler_for(sampling, space)
    kind = getattr(optuna.samplers, sampler)
    # random and bayesian draw each trial with a sampler of their kind seeded for that trial (samplers.py)
    assert isinstance(made, kind) or made.kind is kind
    first = sequence(optuna, sampling, space)
    assert first == sequence(optuna, sampling, space)
    assert len({repr(values) for values in first}) == len(first)  # it samples, it does not repeat one point
    if sampling.type != "grid":
        other = sampling.model_copy(update={"seed": 8})
        assert sequence(optuna, other, space) != first


def test_sobol_is_a_seeded_scrambled_sobol_sequence(optuna):
    sampler = sampler_for(Sampling(type="random", seed=7, rule="sobol"), space_of(**ALL_TEN))
    assert isinstance(sampler, optuna.samplers.QMCSampler)
    assert (sampler._qmc_type, sampler._scramble, sampler._seed) == ("sobol", True, 7)


@SCIPY_STARTS_A_PROCESS
def test_sobol_repeats_its_sequence_with_its_seed(optuna):
    sobol = Sampling(type="random", seed=7, rule="sobol")
    test_each_sampling_has_its_sampler_and_a_seed_repeats_its_sequence(optuna, sobol, "QMCSampler")


@SCIPY_STARTS_A_PROCESS
def test_sobol_draws_fill_the_range_evenly(optuna):
    space = space_of(u={"type": "uniform", "min_value": 0.0, "max_value": 1.0})
    sobol = Sampling(type="random", rule="sobol", seed=3)
    values = sorted(values["--u"] for values in sequence(optuna, sobol, space, 16))
    # a scrambled Sobol sequence puts one point in each sixteenth (after the first, independent one)
    assert len({int(value * 16) for value in values}) >= 14


def test_samplers_without_optuna_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    with pytest.raises(MissingExtra, match=r"tf-train-action\[sweep\]"):
        sampler_for(Sampling(type="random"), space_of(**ALL_TEN))


def test_a_finished_trial_joins_a_study_with_the_spaces_distributions(optuna):
    """Warm start: an earlier sweep's values, as params with the space's distributions, make a trial
    that a new study accepts and whose values read back unchanged."""
    space = space_of(**ALL_TEN)
    study = optuna.create_study(sampler=sampler_for(Sampling(type="random", seed=1), space))
    values = space.suggest(study.ask())
    study.add_trial(
        optuna.trial.create_trial(params=space.internal(values), distributions=space.distributions(), value=0.5)
    )
    assert space.values_of(study.trials[-1].params) == values
