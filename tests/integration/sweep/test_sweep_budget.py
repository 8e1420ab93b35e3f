"""A sweep's cost budget with a CPU price and tiny trials, through the real CLI: no trial starts
that would take the sweep past sweep.limits.max_cost (estimated from the finished trials' mean),
concurrent trials wait for the first trial's cost, the sweep's state and exit code say the budget
stopped it or was passed, a resumed sweep counts what it spent, and a budget without prices is
refused before anything runs."""

from __future__ import annotations

import json

import pytest
from sweeping import show, sweep_manifest

pytestmark = pytest.mark.integration

PRICED = "compute:\n  cost: {cpu_hour: 3600.0}\n"  # one a CPU-second: a trial of ~1.5 s costs ~1.5


def budgeted(
    project, budget: float, trials: int, concurrent: int, extra: str = PRICED, steps: int = 4, pause: float = 0.3
):
    path = sweep_manifest(project, steps=steps, pause=pause, trials=trials, concurrent=concurrent, extra=extra)
    limits = f"max_concurrent_trials: {concurrent}}}"
    path.write_text(path.read_text().replace(limits, f"max_concurrent_trials: {concurrent}, max_cost: {budget}}}"))
    return path


def records(home, trials) -> list[dict]:
    return [json.loads((home / "runs" / t["run_id"] / "run.json").read_text()) for t in trials]


def test_a_sweep_stops_at_its_cost_budget(project, cli, home):
    budget = 4.0
    result = cli("run", "-f", str(budgeted(project, budget, trials=10, concurrent=1)))
    trials = show(cli)["trials"]
    costs = [record["usage"]["cost"] for record in records(home, trials)]
    assert 1 <= len(costs) < 10 and all(cost > 0 for cost in costs)
    # the rule, on the figures measured: the last trial was allowed to start, the next one was not
    before = costs[:-1]
    assert not before or sum(before) + sum(before) / len(before) <= budget
    assert sum(costs) + sum(costs) / len(costs) > budget
    if sum(costs) <= budget:  # stopped in time: the state and the exit code say the budget stopped it
        assert result.returncode == 30, result.stderr
        assert show(cli)["status"] == "StoppedByBudget"
        trials_spent = f"{len(costs)} trial{'s' if len(costs) != 1 else ''} spent"
        line = f"sweep.limits.max_cost ({budget:g}) would be passed: {trials_spent} {sum(costs):.4g}"
        assert f"tftrain: error: sweep demo-sweep-1 stopped by its budget: {line}" in result.stderr
    else:  # one trial alone cost more than the rest of the budget
        assert result.returncode == 31 and show(cli)["status"] == "OverBudget", result.stderr
    assert "Traceback" not in result.stderr
    summary = (home / "sweeps" / "demo-sweep-1" / "summary.md").read_text()
    assert "### Usage and cost" in summary and "| **total** |  | 0 | " in summary
    assert f"{sum(costs):.4g} USD |" in summary or f"{sum(costs):,.2f} USD |" in summary
    assert "**Budget:** sweep.limits.max_cost" in summary


def test_concurrent_trials_do_not_overrun_the_budget(project, cli, home):
    """The issue's case: max_cost 0.5, four trials at once. Each trial costs more than the budget:
    the first runs alone, nothing else starts, and the sweep says it passed the budget (it used to
    start all four before any had a cost, spend 1.12 and end Completed, exit 0, without a word)."""
    result = cli("run", "-f", str(budgeted(project, 0.5, trials=4, concurrent=4)))
    document = show(cli)
    assert len(document["trials"]) == 1, result.stderr
    cost = records(home, document["trials"])[0]["usage"]["cost"]
    assert cost > 0.5
    assert result.returncode == 31, result.stderr
    assert document["status"] == "OverBudget"
    line = f"sweep.limits.max_cost (0.5) was passed: 1 trial spent {cost:.4g}"
    assert document["budget"] == line
    assert f"tftrain: error: sweep demo-sweep-1: {line}" in result.stderr and "Traceback" not in result.stderr
    assert f"**Budget:** {line}" in (home / "sweeps" / "demo-sweep-1" / "summary.md").read_text()
    assert document["best"]["model_version"] == "demo@v1"  # what it ran is kept: the best trial's model is registered


def test_concurrent_trials_start_after_the_first_trials_cost_and_hold_the_mean(project, cli, home):
    budget = 1.0
    cheap = "compute:\n  cost: {cpu_hour: 240.0}\n"  # ~0.1 a trial of ~1.5 s
    result = cli("run", "-f", str(budgeted(project, budget, trials=40, concurrent=3, extra=cheap)))
    document = show(cli)
    runs = records(home, document["trials"])
    first, rest = runs[0], runs[1:]
    assert rest and all(run["created"] >= first["ended"] for run in rest), (
        "a trial started before the first trial's cost was known"
    )
    costs = [run["usage"]["cost"] for run in runs]
    spent = sum(costs)
    assert len(runs) < 40
    if spent <= budget:
        assert (result.returncode, document["status"]) == (30, "StoppedByBudget"), result.stderr
    else:  # the running trials cost more than the finished ones' mean: said, not hidden
        assert (result.returncode, document["status"]) == (31, "OverBudget"), result.stderr
        # the first and more
        assert document["budget"] == f"sweep.limits.max_cost (1) was passed: {len(runs)} trials spent {spent:.4g}"
    if costs[0] < budget / 5:  # room for several at once by the rule: the sweep used its concurrency
        spans = [(run["created"], run["ended"]) for run in rest]
        assert any(a[0] < b[1] and b[0] < a[1] for n, a in enumerate(spans) for b in spans[n + 1 :]), (
            "no two trials ran at once"
        )
    # resume counts what the sweep spent: it starts nothing more, and says the budget stopped it
    again = cli("sweep", "resume", "demo-sweep-1", "-f", str(home.parent / "project" / "tftrain.yml"))
    assert again.returncode in (30, 31), again.stderr
    assert len(show(cli)["trials"]) == len(runs)
    assert "would be passed" in again.stderr or "was passed" in again.stderr


def test_a_cost_budget_without_prices_is_refused_before_any_trial(project, cli, home):
    path = budgeted(project, 0.5, trials=4, concurrent=2, extra="")
    result = cli("run", "-f", str(path))
    assert result.returncode == 3
    assert result.stderr.strip().endswith(
        "sweep.limits.max_cost: a cost budget needs prices: set compute.cost (or, with compute.target: pool, cost: in"
        " the pool file)"
    )
    assert "Traceback" not in result.stderr and not (home / "runs").exists()


def test_a_cost_budget_on_a_pool_without_prices_is_refused_before_any_trial(project, cli, home):
    path = budgeted(project, 0.5, trials=4, concurrent=2, extra="compute:\n  target: pool\n  pool_file: pool.yml\n")
    (path.parent / "pool.yml").write_text("hosts:\n  - {name: box-1, address: 192.0.2.1}\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip().endswith(
        "sweep.limits.max_cost: a cost budget needs prices: compute.cost is not set, and the pool target lists none"
        " (cost: in the pool file)"
    )
    assert not (home / "runs").exists()
    # --target moves a priced-by-the-pool sweep off the pool: no prices there either
    (path.parent / "pool.yml").write_text("hosts:\n  - {name: box-1, address: 192.0.2.1}\ncost: {cpu_hour: 1.0}\n")
    result = cli("run", "--target", "local", "-f", str(path))
    assert result.returncode == 3 and "set compute.cost" in result.stderr, result.stderr
    assert not (home / "runs").exists()
