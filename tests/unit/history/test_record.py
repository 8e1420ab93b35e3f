"""run.json and metrics.json through their models: RunStatus, RunRecord, MetricsSummary."""

from __future__ import annotations

import json

import pytest

from runner.history.record import Attempt, MetricsSummary, RunRecord
from runner.history.states import TERMINAL, Cause, RunStatus
from runner.history.store import Store

MANIFEST = json.dumps({"name": "demo", "entry_script": "train.py"})


def test_a_status_is_its_string():
    assert RunStatus.COMPLETED == "Completed" and RunStatus("TimedOut") is RunStatus.TIMED_OUT
    assert f"{RunStatus.POST_PROCESSING}" == str(RunStatus.POST_PROCESSING) == "PostProcessing"
    assert json.dumps({"status": RunStatus.FAILED}) == '{"status": "Failed"}'
    assert {"Canceled": 1}[RunStatus.CANCELED] == 1
    assert [status for status in RunStatus if status.terminal] == list(TERMINAL)
    assert not RunStatus.RUNNING.terminal and RunStatus.TIMED_OUT.terminal


def test_run_json_round_trips_and_keeps_what_it_does_not_know(tmp_path):
    data = {
        "run_id": "demo-1",
        "name": "demo",
        "status": "Completed",
        "created": 1.0,
        "ended": 3.0,
        "exit_code": 0,
        "message": None,
        "manifest": {"name": "demo"},
        "git": {"commit": "abc"},
        "owner": {"host": "h", "pid": 1},
        "phases": [
            {"phase": "Queued", "started": 1.0, "ended": 2.0},
            {"phase": "Completed", "started": 3.0, "ended": 3.0},
        ],
        "model": "demo@v1",
        "from_a_newer_tftrain": [1, 2],
        "metrics": {
            "primary": "loss",
            "metrics": {"loss": {"last": "nan", "best": 0.1, "best_step": 2, "count": 3, "goal": "minimize"}},
            "tags": {"lr": "0.1"},
        },
    }
    (tmp_path / "run.json").write_text(json.dumps(data))
    record = RunRecord.read(tmp_path / "run.json")
    assert record.status is RunStatus.COMPLETED and record.finished and record.phases[0].phase is RunStatus.QUEUED
    assert record.metrics.primary_last() == "nan" and record.metrics.metrics["loss"].best == 0.1
    assert record.as_dict() == data


def _written(tmp_path, **fields) -> RunRecord:
    data = {
        "run_id": "demo-1",
        "name": "demo",
        "status": "Failed",
        "created": 1.0,
        "manifest": {"name": "demo"},
        **fields,
    }
    (tmp_path / "run.json").write_text(json.dumps(data))
    return RunRecord.read(tmp_path / "run.json")


def test_a_lost_run_is_known_by_its_cause_and_a_record_from_before_by_its_message(tmp_path):
    assert _written(tmp_path, cause="lost", message="lost: tftrain process 7 ended").lost
    older = _written(tmp_path, message="lost: tftrain process 7 ended")  # written before `cause` existed
    assert older.lost and older.cause is Cause.LOST
    assert not _written(tmp_path, message="train.py:1: ValueError: lost: the file").lost
    assert not _written(tmp_path, status="Canceled", message="lost: tftrain process 7 ended").lost
    assert "cause" not in _written(tmp_path, message="boom").as_dict()  # only a run that has one writes it


def test_an_attempt_ended_by_an_exit_code_is_written_as_people_read_it(tmp_path):
    attempt = {
        "number": 1,
        "max_attempts": 3,
        "previous": None,
        "resumed_from": None,
        "ended": "exit code 75",
        "next": "demo-2",
    }
    record = _written(tmp_path, attempt=attempt)
    assert (record.attempt.ended, record.attempt.exit_code) == (Cause.EXIT_CODE, 75)
    assert record.attempt.described() == "attempt 1 of 3; ended exit code 75; continued by demo-2"
    assert record.as_dict()["attempt"] == attempt
    for odd in ("exit code ٧٥", "evicted"):  # no Cause: a damaged record, as an unknown status is
        with pytest.raises(ValueError):
            _written(tmp_path, attempt={**attempt, "ended": odd})
    preempted = Attempt(number=2, max_attempts=3, ended=Cause.PREEMPTED)
    assert (preempted.ending, preempted.as_dict()["ended"]) == ("preempted", "preempted")


def test_a_damaged_run_json_is_reported_as_before(tmp_path):
    home = tmp_path / "home"
    for number, text in (
        (1, "{broken"),
        (2, json.dumps({"status": "Exploded", "manifest": {"name": "demo"}})),
        (3, json.dumps({"status": "Completed", "manifest": {"name": "demo"}, "exit_code": "zero"})),
    ):
        (home / "runs" / f"demo-{number}").mkdir(parents=True)
        (home / "runs" / f"demo-{number}" / "run.json").write_text(text)
    with Store(home) as store:
        assert store.rebuilt.runs == 0
        problems = store.rebuilt.problems
    assert len(problems) == 3 and all("not indexed (its id stays taken)" in problem for problem in problems)
    assert "demo-1: unreadable" in problems[0]
    assert "run.json: status: Input should be 'Queued'" in problems[1] and "\n" not in problems[1]
    assert 'run.json: exit_code is "zero"' in problems[2]


def test_an_unknown_status_in_the_index_is_a_damaged_index(tmp_path):
    from runner.errors import HistoryError

    with Store(tmp_path) as store:
        run_id = store.new_run("demo", MANIFEST)
        store.db.execute("UPDATE runs SET status = 'Exploded'")
        with pytest.raises(HistoryError, match=r"is damaged \(unknown status 'Exploded' in runs.status of demo-1\)"):
            store.run(run_id)


def test_the_store_writes_run_json_through_the_record(tmp_path):
    with Store(tmp_path) as store:
        run_id = store.new_run("demo", MANIFEST)
        store.start_phase(run_id, RunStatus.RUNNING)
        summary = {"primary": None, "metrics": {}}
        store.finish(run_id, RunStatus.TIMED_OUT, 14, "max_run_duration_seconds (1s) reached")
        store.update_run(run_id, model=None, metrics=summary, git={})
        row = store.run(run_id)
        assert row.status is RunStatus.TIMED_OUT and row.finished
        assert [phase.phase for phase in store.phases(run_id)] == [
            RunStatus.QUEUED,
            RunStatus.RUNNING,
            RunStatus.TIMED_OUT,
        ]
    record = json.loads((tmp_path / "runs" / run_id / "run.json").read_text())
    assert (record["status"], record["exit_code"], record["metrics"]) == ("TimedOut", 14, summary)


def test_metrics_json_has_images_and_tags_only_when_there_are_some():
    empty = MetricsSummary()
    assert empty.as_dict() == {"primary": None, "metrics": {}} and empty.primary_last() is None
    data = {
        "primary": "acc",
        "metrics": {"acc": {"last": 0.5, "best": 0.75, "best_step": None, "count": 2, "goal": "maximize"}},
        "images": [{"name": "cm", "path": "outputs/cm.png", "rank": 0}],
    }
    summary = MetricsSummary.model_validate(data)
    assert summary.as_dict() == data and json.loads(summary.to_json()) == data and summary.primary_last() == 0.5
