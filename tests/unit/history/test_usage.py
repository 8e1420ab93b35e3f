"""Usage and cost: the accounting, the record, the words (summary, PR comment line, sweep table), the budget."""

from __future__ import annotations

import json

import pytest

from runner.history.record import RunRecord
from runner.history.usage import GpuStats, Prices, account, prices_of, usage_from, usage_of
from runner.manifest.cost import CostSpec
from runner.telemetry.usage_report import brief, change_line, sweep_costs, sweep_costs_markdown, usage_markdown

PRICES = Prices(gpu_hour=2.5, cpu_hour=0.05)


def test_allocated_seconds_and_cost():
    usage = account(3600.0, processes=4, gpu_processes=2, prices=PRICES)
    assert (usage.cpu_seconds, usage.gpu_seconds, usage.gpu_hours, usage.cpu_hours) == (14400.0, 7200.0, 2.0, 4.0)
    assert usage.cost == pytest.approx(2 * 2.5 + 4 * 0.05)


def test_no_prices_is_no_cost_and_a_negative_wall_is_none():
    usage = account(-5.0, processes=1, gpu_processes=0)
    assert usage.cost is None and usage.wall_seconds == 0.0
    assert "cost" not in usage.as_dict() and "gpus" not in usage.as_dict()  # not measured: left out, not null


def test_prices_come_from_a_cost_spec():
    assert prices_of(CostSpec(gpu_hour=1.0, currency="EUR")) == Prices(gpu_hour=1.0, cpu_hour=0.0, currency="EUR")
    assert prices_of(None) is None


@pytest.mark.parametrize(
    "bad", [{"gpu_hour": -1}, {"gpu_hour": float("inf")}, {"cpu_hour": "1"}, {"currency": "dollars"}, {"gpu_hours": 1}]
)
def test_a_cost_spec_refuses_what_is_no_price(bad):
    with pytest.raises(ValueError):
        CostSpec.model_validate(bad)


def test_the_record_keeps_usage_and_older_records_read_without_it(tmp_path):
    usage = account(
        10.0,
        1,
        1,
        PRICES,
        peak_rss_bytes={"0": 1024},
        gpus=[GpuStats(index=0, utilization_mean=50.0, memory_peak_bytes=5, samples=2)],
    )
    record = RunRecord(run_id="demo-1", name="demo", status="Completed", created=1.0, manifest={}, usage=usage)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record.as_dict()))
    again = RunRecord.read(path)
    assert again.usage == usage and usage_of(again.as_dict()) == usage
    older = RunRecord(run_id="demo-2", name="demo", status="Completed", created=1.0, manifest={})
    assert "usage" not in older.as_dict() and usage_of(older.as_dict()) is None


USAGE = {"wall_seconds": 1, "processes": 1, "cpu_seconds": 1}


@pytest.mark.parametrize(
    "hostile",
    [
        None,
        [],
        "usage",
        {"wall_seconds": "x"},
        {"processes": 1},
        {**USAGE, "cpu_seconds": {}},
        {**USAGE, "gpu_seconds": -3600},
        {**USAGE, "cost": float("inf")},
        {**USAGE, "wall_seconds": float("nan")},
        {**USAGE, "processes": -1},
    ],
)
def test_a_usage_json_that_is_no_usage_is_none(hostile):
    assert usage_from(hostile) is None


def test_the_summary_table():
    usage = account(
        7200.0,
        2,
        2,
        PRICES,
        cpu_seconds_used=100.0,
        peak_rss_bytes={"1": 2 << 30, "0": 1 << 30},
        gpus=[
            GpuStats(
                index=0,
                name="A100",
                utilization_mean=37.5,
                memory_peak_bytes=8 << 30,
                memory_total_bytes=40 << 30,
                samples=9,
            )
        ],
    )
    text = usage_markdown(usage)
    assert "| GPU-hours (allocated) | 4 |" in text and "| cost | 10.20 USD (GPU-hour 2.5, CPU-hour 0.05) |" in text
    assert "| GPU 0 (A100) | 38 % busy on average, peak memory 8 GiB of 40 GiB |" in text
    assert text.index("rank 0 peak memory") < text.index("rank 1 peak memory")
    assert usage_markdown(None) == ""


def test_the_change_against_the_last_release():
    mine = account(3600.0 * 1.12, 1, 1, PRICES)
    theirs = account(3600.0, 1, 1, PRICES)
    summary = {"primary": "accuracy", "metrics": {"accuracy": {"last": 0.904}}}
    base = {"metrics": {"accuracy": {"last": 0.9}}}
    line = change_line(mine, theirs, summary, base, "demo-v3")
    assert line == f"Usage: {brief(mine)}. Against demo-v3: +12 % GPU-hours for +0.4 % accuracy.\n"
    assert "recorded no usage to compare with" in change_line(mine, None, summary, base, "demo-v3")
    cpu_only = change_line(
        account(20.0, 1, 0, PRICES), account(10.0, 1, 0, PRICES), summary, {"metrics": {}}, "demo-v3"
    )
    assert "Against demo-v3: +100 % cost." in cpu_only  # no GPU on either side: the cost tells
    euros = account(10.0, 1, 0, Prices(gpu_hour=0, cpu_hour=0.05, currency="EUR"))
    assert "Against demo-v3: +100 % CPU-hours." in change_line(
        account(20.0, 1, 0, PRICES), euros, summary, {}, "demo-v3"
    )  # no cost across currencies
    hostile = change_line(mine, theirs, summary, {"metrics": {"accuracy": {"last": "nan"}}}, "demo-v3")
    assert hostile.endswith("+12 % GPU-hours.\n")
    for metrics in (
        [1],
        "accuracy",
        3,
    ):  # a release's metrics.json whose `metrics` is no object: no comparison, no traceback
        assert change_line(mine, theirs, summary, {"metrics": metrics}, "demo-v3").endswith("+12 % GPU-hours.\n")


def test_a_sweeps_cost_per_trial_and_in_total():
    trials = [(0, "s-1", account(3600.0, 1, 1, PRICES)), (1, "s-2", None), (2, "s-3", account(1800.0, 1, 1, PRICES))]
    rows, total = sweep_costs(trials)
    assert rows[1] == ["1", "s-2", "—", "—", "—"]
    assert total == ["total", "", "1.5", "1.5", "3.82 USD"]
    assert "| **total** |  | 1.5 | 1.5 | 3.82 USD |" in sweep_costs_markdown(trials)
    assert sweep_costs([(0, "s-1", account(60.0, 1, 0))])[1][-1] == "—"  # unpriced: no total cost
    euros = account(3600.0, 1, 1, Prices(gpu_hour=2.0, cpu_hour=0.1, currency="EUR"))
    assert sweep_costs([trials[0], (3, "s-4", euros)])[1][-1] == "—"  # no sum of dollars and euros


def test_the_usage_of_a_sweeps_runs_is_read_with_the_history_opened_once(tmp_path, monkeypatch):
    import runner.history.store as store_module
    from runner.telemetry.usage_budget import usages_of_runs

    home = tmp_path / "home"
    with store_module.Store(home) as store:
        ran, never = store.new_run("demo", "{}"), store.new_run("demo", "{}")
        store.update_run(ran, usage=account(3600.0, 1, 1, PRICES).as_dict())
    opened = []
    real = store_module.Store
    monkeypatch.setattr(store_module, "Store", lambda home: opened.append(home) or real(home))
    usages = usages_of_runs(home, [ran, None, never, "gone-9"])
    assert [u.gpu_seconds if u else None for u in usages] == [3600.0, None, None, None]
    assert opened == [home]  # once for the four, not once each
    assert usages_of_runs(home, [None, None]) == [None, None] and opened == [home]  # nothing to read: not opened


def test_slurm_billing_prices_the_allocation():
    from runner.history.usage import Allocation
    from runner.manifest.cost import ComputeCostSpec

    prices = prices_of(ComputeCostSpec.model_validate({"from": "slurm", "billing_hour": 0.5, "currency": "EUR"}))
    billed = Allocation(source="sacct", job_id="7", elapsed_seconds=1800.0, cpus=4, billing=6)
    usage = account(1800.0, 4, 0, prices, allocation=billed)
    assert usage.cost == 6 * 0.5 * 0.5  # six units for half an hour, at 0.5 a unit-hour
    assert "1.50 EUR (Slurm billing: 6 units × 0.5 h at 0.5 a unit-hour)" in usage_markdown(usage)
    unbilled = account(1800.0, 4, 0, prices, allocation=Allocation(source="scontrol", elapsed_seconds=1800.0))
    assert unbilled.cost is None and "Slurm's accounting gave no billing units" in usage_markdown(unbilled)
    assert prices_of(CostSpec(gpu_hour=1.0)).billing_hour is None  # a pool file's prices: by the hour
