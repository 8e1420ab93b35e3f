"""The supervision loop: a process gone without an exit code ends the run at once."""

from __future__ import annotations

import time

from runner.errors import Vanished
from runner.targets.base import RunControl
from runner.targets.supervise import by_policy, supervise


def test_a_vanished_process_fails_the_run_before_its_deadline():
    control = RunControl(marker="m", grace_seconds=30, limit_seconds=600, deadline=time.monotonic() + 600)
    stops = []

    def poll():
        raise Vanished("container tftrain-r-1-0 vanished (removed while the run was in progress)")

    started = time.monotonic()
    outcome = supervise(by_policy(poll, stops.append, "main", control), stops.append, control)
    assert time.monotonic() - started < 5
    assert outcome.status == "Failed" and outcome.exit_code is None
    assert (
        outcome.message
        == "ended without an exit code: container tftrain-r-1-0 vanished (removed while the run was in progress)"
    )
    assert stops == [5.0]  # the others are stopped, with the short grace used for leftovers
