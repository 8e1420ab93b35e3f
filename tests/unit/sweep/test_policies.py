"""HyperDrive's early-termination policies as Optuna pruners: exact decisions on hand-built studies.

Each judged trial goes through Optuna's own path (study.ask, trial.report, trial.should_prune), so
the pruner sees what it will see in a sweep; its peers are added as finished or running trials."""

from __future__ import annotations

import importlib
import math
import sys

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from runner.errors import ManifestError, MissingExtra
from runner.manifest.sweep import Bandit, MedianStopping, TruncationSelection
from runner.sweep.policies import BanditPruner, MedianStoppingPruner, TruncationSelectionPruner, pruner_for

optuna.logging.set_verbosity(optuna.logging.WARNING)

MAXIMIZE, MINIMIZE = "maximize", "minimize"


def reports(*values: float) -> dict[int, float]:
    """Reports at intervals 1, 2, 3 …"""
    return {step: value for step, value in enumerate(values, start=1)}


def judge(policy, goal: str, mine: dict[int, float], *peers, state: TrialState = TrialState.COMPLETE) -> bool:
    """Whether a trial reporting `mine` is pruned at its last report, in a study holding `peers`
    (report dicts, or (report dict, state) pairs)."""
    study = optuna.create_study(direction=goal, pruner=pruner_for(policy, goal))
    for peer in peers:
        values, peer_state = peer if isinstance(peer, tuple) else (peer, state)
        value = values[max(values)] if peer_state == TrialState.COMPLETE else None
        study.add_trial(create_trial(state=peer_state, value=value, intermediate_values=values))
    trial = study.ask()
    for step, value in mine.items():
        trial.report(value, step)
    return trial.should_prune()


def bandit(**fields) -> Bandit:
    return Bandit(type="bandit", **fields)


def median(**fields) -> MedianStopping:
    return MedianStopping(type="median_stopping", **fields)


def truncation(**fields) -> TruncationSelection:
    return TruncationSelection(type="truncation_selection", **fields)


def test_without_optuna_the_policies_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # None in sys.modules: the import fails
    monkeypatch.delitem(sys.modules, "runner.sweep.policies")
    with pytest.raises(MissingExtra, match=r"tf-train-action\[sweep\]") as caught:
        importlib.import_module("runner.sweep.policies")
    assert caught.value.exit_code == 24


# -- which pruner, and when it applies ------------------------------------------------------------


def test_no_policy_is_a_pruner_that_never_stops():
    assert isinstance(pruner_for(None, MAXIMIZE), optuna.pruners.NopPruner)
    assert judge(None, MAXIMIZE, reports(0.0), reports(100.0)) is False


def test_each_policy_type_has_its_pruner():
    assert type(pruner_for(bandit(slack_factor=0.1), MAXIMIZE)) is BanditPruner
    assert type(pruner_for(median(), MINIMIZE)) is MedianStoppingPruner
    assert type(pruner_for(truncation(truncation_percentage=20), MAXIMIZE)) is TruncationSelectionPruner
    assert isinstance(pruner_for(median(), MINIMIZE), optuna.pruners.BasePruner)


@pytest.mark.parametrize(
    "interval, delay, applied",
    [(1, 0, [1, 2, 3, 4, 5, 6]), (2, 0, [2, 4, 6]), (1, 5, [5, 6]), (3, 5, [6]), (2, 4, [4, 6]), (100, 200, [])],
)
def test_a_policy_applies_at_multiples_of_the_interval_from_the_delay_on(interval, delay, applied):
    pruner = pruner_for(median(evaluation_interval=interval, delay_evaluation=delay), MAXIMIZE)
    assert [n for n in range(1, 7) if pruner.applies_at(n)] == applied


def test_a_delay_of_200_first_applies_at_200():
    pruner = pruner_for(median(evaluation_interval=100, delay_evaluation=200), MAXIMIZE)
    assert [n for n in range(1, 401) if pruner.applies_at(n)] == [200, 300, 400]


def test_between_evaluations_a_hopeless_trial_goes_on():
    policy = bandit(slack_amount=0.1, evaluation_interval=2)
    peer = reports(1.0, 1.0, 1.0)
    assert judge(policy, MAXIMIZE, reports(0.0), peer) is False
    assert judge(policy, MAXIMIZE, reports(0.0, 0.0), peer) is True
    assert judge(policy, MAXIMIZE, reports(0.0, 0.0, 0.0), peer) is False


def test_before_the_delay_a_hopeless_trial_goes_on():
    policy = median(delay_evaluation=3)
    peers = [reports(1.0, 1.0, 1.0), reports(2.0, 2.0, 2.0)]
    assert judge(policy, MAXIMIZE, reports(0.0, 0.0), *peers) is False
    assert judge(policy, MAXIMIZE, reports(0.0, 0.0, 0.0), *peers) is True


# -- bandit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "goal, best, mine, pruned",
    [
        # maximize, best 1.2, slack_factor 0.2: the bound is 1.2 / 1.2 = 1.0
        (MAXIMIZE, reports(0.6, 1.2), reports(0.9, 0.99), True),
        (MAXIMIZE, reports(0.6, 1.2), reports(1.0, 0.5), False),  # its best so far, 1.0, is on the bound
        # minimize, best 1.0, slack_factor 0.5: the bound is 1.0 * 1.5
        (MINIMIZE, reports(2.0, 1.0), reports(1.6, 1.7), True),
        (MINIMIZE, reports(2.0, 1.0), reports(3.0, 1.5), False),
    ],
)
def test_bandit_slack_factor_is_a_ratio_of_the_best(goal, best, mine, pruned):
    factor = 0.2 if goal == MAXIMIZE else 0.5
    assert judge(bandit(slack_factor=factor), goal, mine, best) is pruned


@pytest.mark.parametrize(
    "goal, mine, pruned",
    [
        (MAXIMIZE, reports(0.5, 0.52), True),  # best 0.8 - 0.25 = 0.55
        (MAXIMIZE, reports(0.5, 0.6), False),
        (MINIMIZE, reports(1.7, 1.6), True),  # best 1.0 + 0.5 = 1.5
        (MINIMIZE, reports(1.7, 1.4), False),
    ],
)
def test_bandit_slack_amount_is_a_distance_from_the_best(goal, mine, pruned):
    best = reports(0.7, 0.8) if goal == MAXIMIZE else reports(1.2, 1.0)
    assert judge(bandit(slack_amount=0.25 if goal == MAXIMIZE else 0.5), goal, mine, best) is pruned


def test_bandit_factor_and_amount_differ():
    best = reports(10.0, 10.0)
    # 10 / 1.1 = 9.09 but 10 - 0.1 = 9.9: 9.5 is within the factor, outside the amount
    assert judge(bandit(slack_factor=0.1), MAXIMIZE, reports(9.5, 9.5), best) is False
    assert judge(bandit(slack_amount=0.1), MAXIMIZE, reports(9.5, 9.5), best) is True
    assert judge(bandit(slack_factor=0.1, slack_amount=0.1), MAXIMIZE, reports(9.5, 9.5), best) is True


@pytest.mark.parametrize("mine", [(-0.5, -1.3), (-1.3, -1.25), (-1.19, -1.25), (-2.0, -1.3)])
def test_bandit_on_a_negated_metric_decides_as_on_the_metric(mine):
    """Maximizing -loss stops the trials that minimizing loss stops, the ratio included."""
    best = (-1.5, -1.0)
    as_maximum = judge(bandit(slack_factor=0.2), MAXIMIZE, reports(*mine), reports(*best))
    as_minimum = judge(bandit(slack_factor=0.2), MINIMIZE, reports(*(-v for v in mine)), reports(*(-v for v in best)))
    assert as_maximum == as_minimum
    assert as_maximum is (max(mine) < -1.2)


def test_bandit_compares_with_the_best_up_to_the_same_interval():
    older = reports(0.5, 0.5, 10.0)  # its third report is after the judged trial's second
    assert judge(bandit(slack_factor=0.2), MAXIMIZE, reports(0.45, 0.45), older) is False
    assert judge(bandit(slack_factor=0.2), MAXIMIZE, reports(0.45, 0.45, 0.45), older) is True


def test_bandit_leaves_out_a_trial_with_no_report_at_the_interval():
    short = reports(10.0)  # finished after one report
    assert judge(bandit(slack_amount=1.0), MAXIMIZE, reports(0.1), short) is True
    assert judge(bandit(slack_amount=1.0), MAXIMIZE, reports(0.1, 0.1), short) is False


def test_bandit_never_stops_the_best_or_a_lone_trial():
    assert judge(bandit(slack_factor=0.01), MAXIMIZE, reports(0.9, 1.0), reports(0.5, 0.99)) is False
    assert judge(bandit(slack_amount=0.01), MINIMIZE, reports(5.0, 4.0)) is False


def test_bandit_counts_running_and_stopped_trials():
    for state in (TrialState.RUNNING, TrialState.PRUNED, TrialState.COMPLETE):
        assert judge(bandit(slack_amount=0.1), MAXIMIZE, reports(0.1), reports(1.0), state=state) is True


def test_bandit_stops_a_trial_that_reports_nan():
    assert judge(bandit(slack_factor=0.5), MINIMIZE, reports(math.nan), reports(3.0)) is True


def test_bandit_without_slack_is_a_manifest_error():
    with pytest.raises(ManifestError, match="slack_factor or slack_amount"):
        pruner_for(bandit(), MAXIMIZE)


# -- median stopping ------------------------------------------------------------------------------

MAXIMIZING_PEERS = (reports(0.6, 0.8), reports(0.7, 0.9))  # running averages 0.7, 0.8
MINIMIZING_PEERS = (reports(0.8, 0.6), reports(0.9, 0.7))  # running averages 0.7, 0.8


@pytest.mark.parametrize(
    "goal, peers, mine, pruned",
    [
        # averages 0.4 (its own), 0.7, 0.8: median 0.7; its best is 0.5
        (MAXIMIZE, MAXIMIZING_PEERS, reports(0.3, 0.5), True),
        # best 0.75 beats the median 0.7 though both peers are ahead at interval 2
        (MAXIMIZE, MAXIMIZING_PEERS, reports(0.1, 0.75), False),
        # averages 0.95, 0.7, 0.8: median 0.8; its best 0.9 is worse
        (MINIMIZE, MINIMIZING_PEERS, reports(1.0, 0.9), True),
        (MINIMIZE, MINIMIZING_PEERS, reports(1.2, 0.75), False),
    ],
)
def test_median_stopping_compares_the_best_with_the_median_of_running_averages(goal, peers, mine, pruned):
    assert judge(median(), goal, mine, *peers) is pruned


def test_median_stopping_counts_the_judged_trial_in_the_median():
    # "across all runs": averages 0.25 (its own), 0.2, 1.0, median 0.25, and its best 0.5 is not
    # worse; the other trials alone would have a median of 0.6
    assert judge(median(), MAXIMIZE, reports(0.0, 0.5), reports(0.2, 0.2), reports(1.0, 1.0)) is False


def test_median_stopping_averages_only_up_to_the_interval():
    later = (reports(0.2, 0.2, 50.0), reports(0.3, 0.3, 50.0))
    assert judge(median(), MAXIMIZE, reports(0.25, 0.25), *later) is False
    assert judge(median(), MAXIMIZE, reports(0.25, 0.25, 0.25), *later) is True


def test_median_stopping_leaves_out_a_trial_with_no_report_at_the_interval():
    short = (reports(5.0), reports(6.0))
    assert judge(median(), MAXIMIZE, reports(1.0), *short) is True
    assert judge(median(), MAXIMIZE, reports(1.0, 1.0), *short) is False


def test_median_stopping_never_stops_a_lone_trial():
    assert judge(median(), MAXIMIZE, reports(1.0, 0.1, 0.0)) is False
    assert judge(median(), MINIMIZE, reports(0.0, 0.5, 9.0)) is False


# -- truncation selection -------------------------------------------------------------------------

FOUR = (reports(0.1, 0.5), reports(0.2, 0.6), reports(0.3, 0.7), reports(0.4, 0.8))


@pytest.mark.parametrize(
    "goal, mine, pruned",
    [
        (MAXIMIZE, reports(0.3, 0.4), True),  # the lowest of five: 20 % of five is one
        (MAXIMIZE, reports(0.3, 0.55), False),
        (MAXIMIZE, reports(0.65, 0.3), False),  # its best so far, 0.65, ranks it third
        (MINIMIZE, reports(0.9, 0.85), True),  # worse than all of 0.1 … 0.4
        (MINIMIZE, reports(0.9, 0.35), False),
    ],
)
def test_truncation_stops_the_lowest_percentage(goal, mine, pruned):
    assert judge(truncation(truncation_percentage=20), goal, mine, *FOUR) is pruned


def test_truncation_cuts_nothing_until_the_percentage_makes_one_trial():
    three = FOUR[:3]  # four trials at the interval: 20 % of four rounds down to none
    assert judge(truncation(truncation_percentage=20), MAXIMIZE, reports(0.0, 0.0), *three) is False
    assert judge(truncation(truncation_percentage=25), MAXIMIZE, reports(0.0, 0.0), *three) is True
    # 50 % of five is two: the second lowest goes too
    assert judge(truncation(truncation_percentage=50), MAXIMIZE, reports(0.0, 0.55), *FOUR) is True
    assert judge(truncation(truncation_percentage=50), MAXIMIZE, reports(0.0, 0.65), *FOUR) is False


def test_truncation_never_cuts_ties():
    same = [reports(0.5, 0.5)] * 4
    assert judge(truncation(truncation_percentage=20), MAXIMIZE, reports(0.5, 0.5), *same) is False


def test_truncation_leaves_out_a_trial_with_no_report_at_the_interval():
    peers = (*FOUR[:3], reports(0.9))
    assert judge(truncation(truncation_percentage=20), MAXIMIZE, reports(0.0), *peers) is True
    assert judge(truncation(truncation_percentage=20), MAXIMIZE, reports(0.0, 0.0), *peers) is False


def test_truncation_ranks_finished_trials_unless_they_are_excluded():
    peers = (
        (reports(0.9, 0.9), TrialState.RUNNING),
        (reports(0.8, 0.8), TrialState.RUNNING),
        (reports(0.1, 0.1), TrialState.COMPLETE),
        (reports(0.2, 0.2), TrialState.PRUNED),
        (reports(0.3, 0.3), TrialState.FAIL),
    )
    mine = reports(0.5, 0.5)
    # six trials, 40 %: two cut, and 0.5 is fourth of six
    assert judge(truncation(truncation_percentage=40), MAXIMIZE, mine, *peers) is False
    # only the running three: one cut, and 0.5 is the lowest
    assert judge(truncation(truncation_percentage=40, exclude_finished_jobs=True), MAXIMIZE, mine, *peers) is True


def test_truncation_stops_a_trial_that_reports_nan():
    assert judge(truncation(truncation_percentage=20), MINIMIZE, reports(0.05, math.nan), *FOUR) is False
    assert judge(truncation(truncation_percentage=20), MINIMIZE, reports(math.nan, math.nan), *FOUR) is True
