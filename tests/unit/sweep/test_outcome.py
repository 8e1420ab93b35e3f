"""runner.sweep.outcome: a trial's verdict is read from its run record's data; a lost run is told
by its cause (a record written before `cause` existed, by its message: mapped where it is read)."""

from __future__ import annotations

import pytest

from runner.history.record import RunRecord, RunStatus
from runner.sweep.outcome import TrialResult, Verdict


def record(status: str, message: str | None = None, **fields) -> RunRecord:
    return RunRecord.model_validate(
        {"run_id": "demo-1", "name": "demo", "status": status, "created": 1.0, "manifest": {}, "message": message, **fields}
    )


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        pytest.param(record("Failed", "tftrain was gone", cause="lost"), Verdict.STOPPED, id="lost"),
        pytest.param(record("Failed", "lost: tftrain process 12 ended"), Verdict.STOPPED, id="lost-before-cause"),
        pytest.param(record("Failed", "train.py exited with code 1"), Verdict.FAILED, id="failed"),
        pytest.param(record("Canceled", "SIGINT"), Verdict.STOPPED, id="canceled"),
        pytest.param(record("Canceled", "early termination at step 2"), Verdict.PRUNED, id="pruned"),
    ],
)
def test_a_verdict_follows_the_record(run, verdict):
    assert TrialResult.of_record(0, run, "score").verdict == verdict


def test_a_trial_run_here_is_never_lost_whatever_its_message_says():
    result = TrialResult(0, "demo-1", RunStatus.FAILED, None, False, "lost: the dataset")
    assert not result.lost and result.verdict == Verdict.FAILED
