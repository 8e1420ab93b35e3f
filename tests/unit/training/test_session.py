"""A run's phases: Running is written to the history once the plan has started (the script does
not wait for the record's fsync), and by the time the phase ends whatever happened, stamped with
when it began."""

from __future__ import annotations

import io
import time
from contextlib import nullcontext

import pytest

from runner.history.states import RunStatus
from runner.settings import LoggerSettings
from runner.targets.base import RunControl
from runner.telemetry.logger import Logger
from runner.training.context import Session


class Store:
    def __init__(self) -> None:
        self.phases: list[tuple[RunStatus, float | None]] = []
        self.reasons: list[str | None] = []

    def start_phase(self, run_id: str, phase: RunStatus, at: float | None = None, reason: str | None = None) -> None:
        assert run_id == "demo-1"
        self.phases.append((phase, at))
        self.reasons.append(reason)


def _session(store: Store) -> Session:
    return Session(store, "demo-1", Logger(io.StringIO(), settings=LoggerSettings()))


def test_running_is_written_once_the_plan_has_started_then_what_was_waiting_runs():
    store, control, calls = Store(), RunControl("TFTRAIN_RUN_ID=demo-1", 1.0), []
    control.started = lambda: calls.append(list(store.phases))  # the lineage, written after the phase
    before = time.time()
    with _session(store).phase(RunStatus.RUNNING, control):
        assert store.phases == []  # the script starts first
        control.started()
        assert [phase for phase, _ in store.phases] == [RunStatus.RUNNING]
        assert calls == [store.phases]
        control.started()  # the target's first poll calls it once; a second call writes nothing twice
    assert len(store.phases) == 1 and before <= store.phases[0][1] <= time.time()


@pytest.mark.parametrize("fails", [False, True])
def test_a_plan_that_never_started_still_has_its_running_phase(fails):
    store, control = Store(), RunControl("TFTRAIN_RUN_ID=demo-1", 1.0)
    with pytest.raises(RuntimeError) if fails else nullcontext():
        with _session(store).phase(RunStatus.RUNNING, control):
            if fails:
                raise RuntimeError("the daemon refused")
    assert [phase for phase, _ in store.phases] == [RunStatus.RUNNING]


def test_other_phases_are_written_as_they_begin():
    store = Store()
    with _session(store).phase(RunStatus.PREPARING):
        assert store.phases == [(RunStatus.PREPARING, store.phases[0][1])] and store.phases[0][1] is not None


def test_a_plan_in_a_schedulers_queue_is_queued_until_it_starts_then_running_from_then():
    """Slurm's PENDING: the target tells control.queued why (as often as that changes), then starts."""
    store, control = Store(), RunControl("TFTRAIN_RUN_ID=demo-1", 1.0)
    with _session(store).phase(RunStatus.RUNNING, control):
        control.queued("Slurm job 7: PENDING (Priority)")
        control.queued("Slurm job 7: PENDING (Resources)")
        assert store.phases == [(RunStatus.QUEUED, None)] * 2
        assert store.reasons == ["Slurm job 7: PENDING (Priority)", "Slurm job 7: PENDING (Resources)"]
        control.started()
        control.queued("too late")  # once it runs, nothing sends it back to the queue
    # Running is stamped when it was written (the job left the queue), not when the phase began
    assert store.phases[2:] == [(RunStatus.RUNNING, None)] and store.reasons[2:] == [None]


@pytest.mark.parametrize("fails", [False, True])
def test_a_plan_that_never_left_the_queue_never_ran(fails):
    """Canceled while pending, or the queue's timeout: Queued is the last phase before the end."""
    store, control = Store(), RunControl("TFTRAIN_RUN_ID=demo-1", 1.0)
    with pytest.raises(RuntimeError) if fails else nullcontext():
        with _session(store).phase(RunStatus.RUNNING, control):
            control.queued("Slurm job 7: PENDING (JobHeldUser)")
            if fails:
                raise RuntimeError("the queue's timeout")
    assert [phase for phase, _ in store.phases] == [RunStatus.QUEUED]


def test_other_phases_have_no_queue():
    store, control = Store(), RunControl("TFTRAIN_RUN_ID=demo-1", 1.0)
    with _session(store).phase(RunStatus.PREPARING):
        assert control.queued is None
