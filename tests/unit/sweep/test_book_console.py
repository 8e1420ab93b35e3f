"""runner.sweep.book: the sweep's console line of each trial as it ends, without a study."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from runner.history.states import RunStatus
from runner.settings import LoggerSettings
from runner.sweep.book import SweepBook
from runner.sweep.outcome import TrialResult
from runner.telemetry.logger import Logger

HELD = "compute.queue_timeout_seconds (30s) passed and Slurm job 42_1 is still PENDING (JobHeldAdmin); it was canceled"


def shown(result: TrialResult) -> str:
    stream = io.StringIO()
    book = SimpleNamespace(sweep=SimpleNamespace(metrics=("score",)))  # all show_trial reads of its book off GitHub
    logger = Logger(stream, settings=LoggerSettings())
    SweepBook.show_trial(book, logger, result.number, result)
    logger.flush()
    return stream.getvalue()


@pytest.mark.parametrize(
    ("status", "message", "line"),
    [
        (RunStatus.FAILED, HELD, f"trial 1 (demo-2): Failed ({HELD})"),
        (RunStatus.TIMED_OUT, "max_run_duration_seconds (5s) reached", "trial 1 (demo-2): TimedOut (max_run"),
        (RunStatus.FAILED, None, "trial 1 (demo-2): Failed\n"),
        (RunStatus.COMPLETED, "ignored", "trial 1 (demo-2): Completed  score=0.5\n"),
    ],
)
def test_a_trial_that_did_not_complete_says_why(status, message, line):
    value = 0.5 if status == RunStatus.COMPLETED else None
    assert line in shown(TrialResult(1, "demo-2", status, value, False, message))
