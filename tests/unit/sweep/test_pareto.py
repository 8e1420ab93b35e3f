"""A multi-objective sweep: the Pareto front (exact, fast on many trials, hostile rows ignored), the
trial that registers, and the study, sweep.json, the table and the summary a book writes of it."""

from __future__ import annotations

import json
import math
import time

import pytest

from runner.errors import SweepError
from runner.manifest.sweep import Objective, SweepSpec
from runner.sweep.pareto import dominates, objective_metrics, pareto_front, points_of
from runner.sweep.study import open_sweep

MAX_MIN = ["maximize", "minimize"]
ACC = Objective(primary_metric="acc", goal="maximize")
LATENCY = Objective(primary_metric="latency_ms", goal="minimize")


def test_dominance_needs_one_strictly_better_and_none_worse():
    assert dominates((2, 2), (1, 2)) and not dominates((2, 2), (2, 2)) and not dominates((3, 1), (1, 2))


def test_the_front_of_accuracy_against_latency():
    points = [
        (0, (0.90, 30.0)),
        (1, (0.80, 10.0)),
        (2, (0.85, 40.0)),
        (3, (0.95, 50.0)),
        (4, (0.80, 12.0)),
        (5, (0.70, 10.0)),
    ]
    assert pareto_front(points, MAX_MIN) == [3, 0, 1]  # best on the first objective first
    assert pareto_front(points, MAX_MIN)[0] == 3  # the sweep's best


def test_equal_points_both_stay_and_ties_go_to_the_next_objective_then_the_earlier_trial():
    points = [(4, (0.9, 20.0)), (2, (0.9, 20.0)), (7, (0.9, 10.0))]
    assert pareto_front(points, MAX_MIN) == [7]
    assert pareto_front([(4, (0.9, 20.0)), (2, (0.9, 20.0))], MAX_MIN) == [2, 4]
    assert pareto_front([(4, (0.9, 20.0)), (2, (0.9, 20.0))], MAX_MIN)[0] == 2


def test_three_objectives_and_both_goals_minimized():
    points = [(0, (1.0, 1.0, 5.0)), (1, (2.0, 0.5, 5.0)), (2, (1.0, 1.0, 4.0)), (3, (3.0, 3.0, 3.0))]
    assert sorted(pareto_front(points, ["minimize", "minimize", "minimize"])) == [1, 2, 3]


def test_a_value_that_is_no_number_is_left_off_the_front():
    points = [(0, (math.nan, 1.0)), (1, (0.5, math.inf)), (2, (0.1, 50.0))]
    assert pareto_front(points, MAX_MIN) == [2]
    assert pareto_front([], MAX_MIN) == []


def test_many_trials_take_little_time():
    # 300 points on a line (each on the front) and 50,000 behind them all: ~0.3 s here, where
    # comparing every pair (1.3e9 comparisons) would take minutes; the bound leaves room for a loaded machine
    points = [(n, (n / 300, float(n))) for n in range(300)] + [(300 + n, (-1.0, 1e9 + n)) for n in range(50_000)]
    started = time.perf_counter()
    front = pareto_front(points, MAX_MIN)
    assert len(front) == 300 and time.perf_counter() - started < 5.0


def test_hostile_rows_give_no_points():
    rows = [
        {"number": 0, "values": {"acc": 0.9, "latency_ms": 10}},
        {"number": 1, "values": {"acc": True, "latency_ms": 10}},
        {"number": 2, "values": {"acc": "0.9", "latency_ms": 10}},
        {"number": 3, "values": ["acc"]},
        {"number": "4", "values": {"acc": 0.9, "latency_ms": 10}},
        {"number": 5, "values": {"acc": 0.9}},
        {"number": 6},
    ]
    assert points_of(rows, ["acc", "latency_ms"]) == [(0, (0.9, 10.0))]


@pytest.mark.parametrize(
    "objective", [None, [], [{"primary_metric": 3}], {"goal": "maximize"}, [{"primary_metric": "a"}, "b"], "acc"]
)
def test_an_objective_that_is_neither_form_is_no_sweep_record(objective):
    with pytest.raises(ValueError):
        objective_metrics({"objective": objective})


def test_a_hostile_multi_objective_sweep_json_is_no_record_or_shows_what_it_can(tmp_path):
    from runner.sweep.book import read_sweep, sweeps_root
    from runner.sweep.summary import summary_markdown

    folder = sweeps_root(tmp_path) / "demo-sweep-1"
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps({"trials": [], "objective": [{"primary_metric": "a"}, None]}))
    with pytest.raises(ValueError, match="is not a sweep's record"):
        read_sweep(tmp_path, "demo-sweep-1")
    trial = {
        "number": 0,
        "run_id": None,
        "status": "Completed",
        "early_terminated": False,
        "params": {},
        "value": 1.0,
        "values": {"a": "<script>", "b": [1]},
    }
    document = {
        "id": "demo-sweep-1",
        "status": "Completed",
        "objective": [{"primary_metric": "a"}, {"primary_metric": "b"}],
        "trials": [trial],
        "best": None,
        "curves": {},
        "pareto": "all",
    }
    (folder / "sweep.json").write_text(json.dumps(document))
    read = read_sweep(tmp_path, "demo-sweep-1")
    markdown = summary_markdown(read, "a")
    assert "<script>" not in markdown and "| 0 |  | Completed |  |  |  |" in markdown  # a value no number is no cell


def multi_sweep(tmp_path, objectives=(ACC, LATENCY)):
    spec = SweepSpec.model_validate(
        {
            "search_space": {"--x": {"type": "uniform", "min_value": 0, "max_value": 1}},
            "limits": {"max_total_trials": 9},
        }
    )
    return open_sweep(spec, "demo", tuple(objectives), 9, tmp_path, {})


def test_a_multi_objective_study_has_a_direction_per_objective_and_the_book_its_front(tmp_path):
    from runner.history.record import RunStatus
    from runner.sweep.book import SweepBook
    from runner.sweep.outcome import TrialResult, tell
    from runner.sweep.summary import summary_markdown

    sweep = multi_sweep(tmp_path)
    assert [d.name for d in sweep.study.directions] == ["MAXIMIZE", "MINIMIZE"] and sweep.multi
    assert sweep.study.user_attrs["objective"] == [ACC.model_dump(), LATENCY.model_dump()]
    for acc, latency in ((0.9, 30.0), (0.8, 10.0), (0.7, 40.0), (None, 5.0)):
        trial = sweep.study.ask()
        trial.set_user_attr("values", sweep.space.suggest(trial))
        trial.set_user_attr("run_id", f"demo-{trial.number + 1}")
        metrics = {
            name: {"last": value} for name, value in (("acc", acc), ("latency_ms", latency)) if value is not None
        }
        tell(
            sweep.study,
            trial,
            TrialResult.of_run(
                trial.number, f"demo-{trial.number + 1}", RunStatus.COMPLETED, metrics, sweep.metrics, False, None
            ),
        )
    book = SweepBook(tmp_path, sweep, register=False)
    book.finish(canceled=False)
    document = book.document()
    assert document["pareto"] == [0, 1]
    assert document["best"] == {
        "number": 0,
        "run_id": "demo-1",
        "value": 0.9,
        "values": {"acc": 0.9, "latency_ms": 30.0},
        "model_version": None,
    }
    assert [t["status"] for t in document["trials"]] == ["Completed", "Completed", "Completed", "Failed"]
    assert document["trials"][3]["message"] == "completed without reporting 'acc'; it reported: latency_ms"
    markdown = summary_markdown(document, "acc")
    assert "| trial | run | status | acc | latency_ms | params |" in markdown
    assert "Best: trial 0 (run `demo-1`), acc=0.9 latency_ms=30 (on the Pareto front, the best on acc)" in markdown
    assert (
        "Pareto front (2 trials, none beaten on every objective by another):" in markdown
        and "| 1 | 0.8 | 10 |" in markdown
    )
    saved = json.loads((tmp_path / "sweeps" / sweep.sweep_id / "sweep.json").read_text())
    assert saved["pareto"] == [0, 1]


def test_joining_with_another_set_of_objectives_is_refused(tmp_path):
    first = multi_sweep(tmp_path)
    spec = SweepSpec.model_validate(
        {
            "search_space": {"--x": {"type": "uniform", "min_value": 0, "max_value": 1}},
            "limits": {"max_total_trials": 9},
        }
    )
    with pytest.raises(SweepError, match="its objective is"):
        open_sweep(spec, "demo", (ACC,), 9, tmp_path, {}, sweep_id=first.sweep_id, create=False)
    assert open_sweep(spec, "demo", (ACC, LATENCY), 9, tmp_path, {}, sweep_id=first.sweep_id, create=False).multi


def test_warm_start_takes_trials_of_as_many_objectives_only(tmp_path):
    from runner.history.record import RunStatus
    from runner.sweep.outcome import TrialResult, tell

    earlier = multi_sweep(tmp_path)
    trial = earlier.study.ask()
    trial.set_user_attr("values", earlier.space.suggest(trial))
    reported = {"acc": {"last": 0.5}, "latency_ms": {"last": 3}}
    tell(
        earlier.study,
        trial,
        TrialResult.of_run(0, "demo-1", RunStatus.COMPLETED, reported, earlier.metrics, False, None),
    )
    base = {
        "search_space": {"--x": {"type": "uniform", "min_value": 0, "max_value": 1}},
        "limits": {"max_total_trials": 9},
        "warm_start": [earlier.sweep_id],
    }
    spec = SweepSpec.model_validate(base)
    again = open_sweep(spec, "demo", (ACC, LATENCY), 9, tmp_path, {})
    assert [t.values for t in again.study.trials] == [[0.5, 3.0]]
    single = open_sweep(spec, "demo", ACC, 9, tmp_path, {})
    assert single.study.trials == []  # two values tell a one-objective sampler nothing
