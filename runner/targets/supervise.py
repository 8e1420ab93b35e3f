"""When a started plan is over: the one loop every target runs it under (our clock decides the
time-out), and the success policy that decides from its processes' exit codes."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from runner.errors import Vanished
from runner.history.states import RunStatus
from runner.plan.model import Role, SuccessPolicy, TaskSpec
from runner.targets.base import Outcome


def decide(codes: list[tuple[TaskSpec, int | None]], policy: SuccessPolicy) -> Outcome | None:
    """The outcome once the success policy can tell it; None while it cannot.

    main: the first process decides (single, mpirun). chief: the chief (else worker 0) ending well
    ends the job. all_workers: every worker ending well does. Under both, a task that fails first
    fails the job."""
    failed = [(task, code) for task, code in codes if code not in (None, 0)]
    if policy == SuccessPolicy.MAIN:
        code = codes[0][1]
        if code is None:
            return None
        if code == 0:
            return Outcome(RunStatus.COMPLETED, 0, None)
        return Outcome(RunStatus.FAILED, code, f"exited with code {describe_code(code)}", codes[0][0].rank)
    if failed:
        task, code = failed[0]
        return Outcome(RunStatus.FAILED, code, f"{task.label} exited with code {describe_code(code)}", task.rank)
    if policy == SuccessPolicy.CHIEF:
        chief = next((c for c in codes if c[0].role == Role.CHIEF), None) or next(
            c for c in codes if c[0].role == Role.WORKER
        )
        return Outcome(RunStatus.COMPLETED, 0, None) if chief[1] == 0 else None
    workers = [code for task, code in codes if task.role == Role.WORKER]
    return Outcome(RunStatus.COMPLETED, 0, None) if all(code == 0 for code in workers) else None


def describe_code(code: int) -> str:
    # a signal: -N from Python, 128 + N from a shell or a container runtime
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        return f"{code} (killed by {signal.Signals(number).name})" if number else str(code)
    except ValueError:
        return str(code)


POLL_SECONDS = 0.1
STOP_REST_SECONDS = 5.0


def supervise(
    judge: Callable[[], Outcome | None],
    stop: Callable[[float], None],
    control,
    *,
    every: float = POLL_SECONDS,
    stopped: str = "",
) -> Outcome:
    """Watch a started plan until it is decided, canceled or out of time: the one clock of every target.

    `judge()` gives the outcome once the plan's processes or job tell it, None while they run;
    `stop(grace)` stops them all: termination, `grace` seconds, then kill. A judge that raises
    Vanished fails the run at once. `stopped` ends the message of a run stopped here ("; the job
    was deleted"). `control.started` (the plan has started) is called at the first poll: the
    script's first `every` seconds are its own, not shared with the lineage's git calls and files."""
    started = control.started
    while True:
        time.sleep(every)
        if started is not None:
            started()
            started = None
        try:
            outcome = judge()
        except Vanished as gone:
            stop(min(control.grace_seconds, STOP_REST_SECONDS))
            return Outcome(RunStatus.FAILED, None, f"ended without an exit code: {gone}", taken=True)
        if outcome is not None:
            return outcome
        if control.cancel.is_set():
            stop(0.0 if control.force.is_set() else control.grace_seconds)
            return canceled(control, stopped)
        if control.deadline is not None and time.monotonic() >= control.deadline:
            stop(control.grace_seconds)
            return Outcome(
                RunStatus.TIMED_OUT, None, f"max_run_duration_seconds ({control.limit_seconds}s) reached{stopped}"
            )


def canceled(control, stopped: str = "") -> Outcome:
    """The outcome of a plan stopped for `control.cancel`: a sweep's reason, else the signal's."""
    return Outcome(RunStatus.CANCELED, None, (control.reason or "canceled by a signal to tftrain") + stopped)


def by_policy(
    poll: Callable[[], list[tuple[TaskSpec, int | None]]], stop: Callable[[float], None], policy: SuccessPolicy, control
) -> Callable[[], Outcome | None]:
    """A judge of started processes: `poll()` gives (task, exit code or None) for every one, the
    success policy decides (see `decide`)."""

    def judge() -> Outcome | None:
        codes = poll()
        outcome = decide(codes, policy)
        if outcome is not None and any(
            code is None for _, code in codes
        ):  # the rest (parameter servers) never end on their own
            stop(min(control.grace_seconds, STOP_REST_SECONDS))
        return outcome

    return judge
