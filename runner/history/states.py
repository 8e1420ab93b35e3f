"""A run's states as data, without pydantic: where a run is (RunStatus) and why it ended from outside
its script (Cause). What lists and judges runs (`tftrain runs`, the history index) needs no more;
runner.history.record builds the run record on them."""

from __future__ import annotations

from enum import Enum


class RunStatus(str, Enum):
    """Where a run is: the phases it goes through, then how it ended. The values are what run.json,
    tftrain.db and the action's `status` output hold, so a status compares equal to its string."""

    QUEUED = "Queued"
    PREPARING = "Preparing"
    RUNNING = "Running"
    POST_PROCESSING = "PostProcessing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELED = "Canceled"
    TIMED_OUT = "TimedOut"

    # f"{status}" is the value on every Python (3.12 made a mixed-in enum format as RunStatus.X)
    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def terminal(self) -> bool:
        """The run has ended: the status is a mark, not a phase that takes time."""
        return self in TERMINAL


TERMINAL: tuple[RunStatus, ...] = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED, RunStatus.TIMED_OUT)


class Cause(str, Enum):
    """Why a run ended from outside its script's own verdict: the states `retry:` and a sweep decide
    by, kept as data (run.json's `cause`, an attempt's `ended`) and never read back from a message.
    The values are `retry.on`'s words and what run.json holds."""

    PREEMPTED = "preempted"  # its machine, container or training was taken away
    LOST = "lost"  # its tftrain was killed: a later command found the run orphaned (runner.targets.leftovers.reconcile)
    EXIT_CODE = "exit code"  # the script exited with one of `retry.exit_codes` (the code beside it)
    # a sweep's early-termination policy stopped the trial (runner.sweep.trial.TrialWatch)
    EARLY_TERMINATION = "early termination"

    __str__ = str.__str__
    __format__ = str.__format__
