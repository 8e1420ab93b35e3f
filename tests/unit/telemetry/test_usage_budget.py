"""A sweep's budget (runner.telemetry.usage_budget): the first trial runs alone, each running
trial holds the finished trials' mean, and a budget the trials passed is said."""

from __future__ import annotations

from runner.history.usage import Prices, account
from runner.telemetry.usage_budget import Go, NextTrial, SweepBudget


def limits(**given):
    return type("Limits", (), {"max_gpu_hours": None, "max_cost": None, **given})()


def costing(cost: float):
    """A trial's usage that cost `cost` (one CPU for an hour at that price)."""
    return account(3600.0, 1, 0, Prices(gpu_hour=0, cpu_hour=cost))


def test_no_budget_no_limits():
    assert SweepBudget.of(limits()) is None


def test_the_first_trial_runs_alone_until_there_is_an_estimate():
    budget = SweepBudget.of(limits(max_cost=0.5))
    assert budget.next_trial(running=0) == NextTrial(Go.START)
    assert budget.next_trial(running=1) == NextTrial(Go.WAIT)  # not a second one before the first's cost is known
    assert budget.next_trial(running=3) == NextTrial(Go.WAIT)
    budget.add("s-1", None)  # it never trained: still nothing to estimate from
    assert budget.next_trial(running=0).go == Go.START and budget.next_trial(running=1).go == Go.WAIT


def test_each_running_trial_holds_the_mean():
    budget = SweepBudget.of(limits(max_cost=1.0))
    budget.add("s-1", costing(0.2))
    budget.add("s-2", costing(0.2))  # 0.4 spent, 0.2 each
    assert budget.next_trial(running=0).go == Go.START  # 0.4 + 0.2
    assert budget.next_trial(running=2).go == Go.START  # 0.4 + 3 × 0.2 = 1.0: not past it
    assert budget.next_trial(running=3) == NextTrial(Go.WAIT)  # 0.4 + 4 × 0.2: may fit when they end cheaper
    budget.add("s-3", costing(0.5))
    budget.add("s-4", costing(0.1))  # 1.0 spent, 0.25 each
    verdict = budget.next_trial(running=0)
    assert verdict.go == Go.STOP
    assert (
        verdict.line
        == "sweep.limits.max_cost (1) would be passed: 4 trials spent 1 (0.25 each on average), 0 still running; no"
        " more trials start"
    )
    assert budget.passed() is None  # reached, not passed


def test_the_gpu_hours_budget():
    budget = SweepBudget.of(limits(max_gpu_hours=2.5))
    budget.add("s-1", account(3600.0, 2, 2))  # 2 GPU-hours
    assert budget.next_trial(running=1).go == Go.WAIT
    assert (
        "sweep.limits.max_gpu_hours (2.5 GPU-hours) would be passed: 1 trial spent 2 GPU-hours"
        in budget.next_trial(running=0).line
    )


def test_a_passed_budget_is_said_with_what_was_spent():
    budget = SweepBudget.of(limits(max_cost=0.5, max_gpu_hours=10.0))
    for n in range(4):
        budget.add(f"s-{n}", costing(0.28))
    assert budget.passed() == "sweep.limits.max_cost (0.5) was passed: 4 trials spent 1.12"


def test_a_cost_budget_without_prices_says_what_to_set():
    budget = SweepBudget.of(limits(max_cost=1.0))
    budget.add("s-1", account(10.0, 1, 0))
    assert budget.next_trial(running=2) == NextTrial(
        Go.STOP,
        "sweep.limits.max_cost: run s-1 has no cost to count; set compute.cost (or cost: in the pool file) to keep a"
        " cost budget",
    )
