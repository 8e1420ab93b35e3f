"""runner.sweep.outcome: a trial's verdict is read from its run record's data; a lost run and one its
policy stopped are told by their cause (a record written before `cause` existed, by its message:
mapped once, where the record is read); a multi-objective trial is told every objective's value."""

from __future__ import annotations

import pytest

from runner.history.record import Cause, RunRecord, RunStatus
from runner.sweep.outcome import TrialResult, Verdict, tell

TRIAL = {"id": "demo-sweep-1", "trial": 0}


def record(status: str, message: str | None = None, **fields) -> RunRecord:
    return RunRecord.model_validate(
        {
            "run_id": "demo-1",
            "name": "demo",
            "status": status,
            "created": 1.0,
            "manifest": {},
            "message": message,
            **fields,
        }
    )


def summary(**last) -> dict:
    return {
        "metrics": {
            name: {"last": value, "best": value, "count": 1, "goal": "maximize"} for name, value in last.items()
        }
    }


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        pytest.param(record("Failed", "tftrain was gone", cause="lost"), Verdict.STOPPED, id="lost"),
        pytest.param(record("Failed", "lost: tftrain process 12 ended"), Verdict.STOPPED, id="lost-before-cause"),
        pytest.param(record("Failed", "train.py exited with code 1"), Verdict.FAILED, id="failed"),
        pytest.param(record("Canceled", "SIGINT"), Verdict.STOPPED, id="canceled"),
        pytest.param(
            record("Canceled", "stopped at step 2", cause="early termination", sweep=TRIAL), Verdict.PRUNED, id="pruned"
        ),
        pytest.param(
            record("Canceled", "early termination at step 2", sweep=TRIAL), Verdict.PRUNED, id="pruned-before-cause"
        ),
    ],
)
def test_a_verdict_follows_the_record(run, verdict):
    assert TrialResult.of_record(0, run, ("score",)).verdict == verdict


def test_early_termination_is_the_cause_never_the_words():
    # a run that was no trial, canceled with a message that happens to begin so, was not pruned
    run = record("Canceled", "early termination requested by the user")
    assert run.cause is None and TrialResult.of_record(0, run, ("score",)).verdict == Verdict.STOPPED
    pruned = record("Canceled", "early termination at step 3", sweep=TRIAL)
    assert pruned.cause == Cause.EARLY_TERMINATION
    assert pruned.as_dict()["cause"] == "early termination"  # written back as data
    # a trial Completed whose message begins so is not pruned either: the cause is read for Canceled runs only
    assert (
        TrialResult.of_record(
            0, record("Completed", "early termination", sweep=TRIAL, metrics=summary(score=1.0)), ("score",)
        ).verdict
        == Verdict.COMPLETE
    )


def test_a_trial_run_here_is_never_lost_whatever_its_message_says():
    result = TrialResult(0, "demo-1", RunStatus.FAILED, None, False, "lost: the dataset")
    assert not result.lost and result.verdict == Verdict.FAILED


def test_a_multi_objective_trial_carries_every_value():
    result = TrialResult.of_record(
        0, record("Completed", None, metrics=summary(acc=0.9, latency_ms=12)), ("acc", "latency_ms")
    )
    assert result.values == (0.9, 12.0) and result.value == 0.9 and result.verdict == Verdict.COMPLETE


def test_a_completed_trial_missing_an_objective_failed_and_says_which():
    result = TrialResult.of_record(
        4, record("Completed", None, metrics=summary(acc=0.9, loss=0.1)), ("acc", "latency_ms")
    )
    assert result.verdict == Verdict.FAILED and result.shown_status == RunStatus.FAILED
    assert result.missing == ("latency_ms",)
    assert result.message == "completed without reporting 'latency_ms'; it reported: acc, loss"


def test_a_failed_run_misses_nothing_it_simply_failed():
    result = TrialResult.of_record(0, record("Failed", "train.py exited with code 1"), ("acc", "latency_ms"))
    assert result.missing == () and result.message == "train.py exited with code 1"


class _Study:
    def __init__(self):
        self.told = []

    def tell(self, trial, values=None, state=None):
        self.told.append((values, state))


class _Trial:
    def __init__(self):
        self.attrs = {}

    def set_user_attr(self, key, value):
        self.attrs[key] = value


def test_tell_hands_a_multi_objective_study_the_list_and_a_single_one_the_value():
    study = _Study()
    multi = TrialResult.of_record(
        0, record("Completed", None, metrics=summary(acc=0.9, latency_ms=12)), ("acc", "latency_ms")
    )
    single = TrialResult.of_record(1, record("Completed", None, metrics=summary(acc=0.8)), ("acc",))
    assert tell(study, _Trial(), multi) == Verdict.COMPLETE and tell(study, _Trial(), single) == Verdict.COMPLETE
    assert study.told == [([0.9, 12.0], None), (0.8, None)]
