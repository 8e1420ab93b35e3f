"""A sweep's cost budget with a CPU price and tiny trials: no trial starts that would take the sweep
past sweep.limits.max_cost (estimated from the finished trials' mean), and the sweep says so."""

from __future__ import annotations

import json

import pytest

from sweeping import show, sweep_manifest

pytestmark = pytest.mark.integration

BUDGET = 4.0
PRICED = "compute:\n  cost: {cpu_hour: 3600.0}\n"  # one a CPU-second: a trial of ~1.5 s costs ~1.5


def test_a_sweep_stops_at_its_cost_budget(project, cli, home):
    path = sweep_manifest(project, steps=4, pause=0.3, trials=10, concurrent=1, extra=PRICED)
    path.write_text(path.read_text().replace("max_concurrent_trials: 1}", f"max_concurrent_trials: 1, max_cost: {BUDGET}}}"))
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    trials = show(cli)["trials"]
    costs = [json.loads((home / "runs" / t["run_id"] / "run.json").read_text())["usage"]["cost"] for t in trials]
    assert 1 <= len(costs) < 10 and all(cost > 0 for cost in costs)
    # the rule, on the figures measured: the last trial was allowed to start, the next one was not
    before = costs[:-1]
    assert not before or sum(before) + sum(before) / len(before) <= BUDGET
    assert sum(costs) + sum(costs) / len(costs) > BUDGET
    line = f"sweep.limits.max_cost ({BUDGET:g}) would be passed: {len(costs)} trials spent {sum(costs):.4g}"
    assert line in result.stderr + result.stdout
    summary = (home / "sweeps" / "demo-sweep-1" / "summary.md").read_text()
    assert "### Usage and cost" in summary and f"| **total** |  | 0 | " in summary
    assert f"{sum(costs):.4g} USD |" in summary or f"{sum(costs):,.2f} USD |" in summary
