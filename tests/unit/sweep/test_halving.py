"""asha and hyperband: Optuna's successive halving behind `early_termination`, judged through
Optuna's own path (ask, report at steps 1, 2, 3 …, should_prune, tell), one trial after another."""

from __future__ import annotations

import math

import optuna
import pytest

from runner.manifest.sweep import Asha, Hyperband
from runner.sweep.policies import pruner_for

optuna.logging.set_verbosity(optuna.logging.WARNING)


def run(study, values: list[float]) -> int | None:
    """A trial reporting `values` at steps 1, 2, …: the step it was pruned at, else None (told complete)."""
    trial = study.ask()
    for step, value in enumerate(values, start=1):
        trial.report(value, step)
        if trial.should_prune():
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return step
    study.tell(trial, values[-1])
    return None


def asha(**fields) -> Asha:
    return Asha(type="asha", **fields)


@pytest.mark.parametrize(("goal", "good", "bad"), [("maximize", 1.0, 0.5), ("minimize", 0.5, 1.0)])
def test_asha_cuts_the_worse_half_at_the_first_rung(goal, good, bad):
    study = optuna.create_study(direction=goal, pruner=pruner_for(asha(min_resource=1, reduction_factor=2), goal))
    assert run(study, [good, good]) is None  # alone at its rung: it goes on
    assert run(study, [bad, bad]) == 1  # behind the best half of the two at step 1
    better = 2 * good if goal == "maximize" else good / 2
    assert run(study, [better, better]) is None


def test_asha_judges_nothing_before_min_resource():
    study = optuna.create_study(
        direction="maximize", pruner=pruner_for(asha(min_resource=3, reduction_factor=2), "maximize")
    )
    assert run(study, [1.0, 1.0, 1.0, 1.0]) is None
    assert run(study, [0.1, 0.1, 0.1, 0.1]) == 3  # reported steps 1 and 2 unjudged: the first rung is min_resource


def test_asha_cuts_a_nan_report_at_its_rung():
    study = optuna.create_study(direction="maximize", pruner=pruner_for(asha(), "maximize"))
    assert run(study, [1.0, 1.0]) is None
    assert run(study, [math.nan, 1.0]) == 1


def test_hyperband_with_one_bracket_is_successive_halving():
    policy = Hyperband(type="hyperband", min_resource=1, max_resource=1, reduction_factor=2)
    study = optuna.create_study(direction="maximize", pruner=pruner_for(policy, "maximize"))
    assert run(study, [1.0]) is None
    assert run(study, [0.5]) == 1
    assert run(study, [2.0]) is None


def test_hyperband_spreads_trials_over_its_brackets_and_prunes_in_them():
    policy = Hyperband(type="hyperband", min_resource=1, max_resource=9, reduction_factor=3)
    pruner = pruner_for(policy, "maximize")
    assert isinstance(pruner, optuna.pruners.HyperbandPruner)
    study = optuna.create_study(direction="maximize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=1))
    ends = [run(study, [float(n % 5)] * 9) for n in range(30)]
    pruned = [step for step in ends if step is not None]
    assert pruned and set(pruned) <= {1, 3, 9}  # its rungs: min_resource × reduction_factor^k
    assert len(pruned) < len(ends)


def test_hyperband_max_resource_unset_is_optunas_auto():
    assert pruner_for(Hyperband(type="hyperband"), "maximize")._max_resource == "auto"
    assert pruner_for(Hyperband(type="hyperband", max_resource=27), "minimize")._max_resource == 27
