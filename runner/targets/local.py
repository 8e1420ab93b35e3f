"""The local target: the plan's processes run on this machine, each in its own process group."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from runner.logpump import LineSink, LogPump
from runner.plan import LaunchPlan
from runner.processes import spawn, stop_tree, sweep_descendants
from runner.targets import Outcome, RunControl

name = "local"
POLL_SECONDS = 0.1
PUMP_JOIN_SECONDS = 10.0


def execute(plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl) -> Outcome:
    processes: list[subprocess.Popen] = []
    try:
        for task in plan.tasks:
            try:
                process, fd = spawn(task.argv, Path(task.cwd), task.env)
            except OSError as exc:
                return Outcome("Failed", None, f"cannot start {task.argv[0]}: {exc.strerror}")
            pump.add(task.rank, fd, sinks.get(task.rank))
            processes.append(process)
        outcome = _wait(processes, control)
    finally:
        if any(process.poll() is None for process in processes):
            stop_tree(processes, control.grace_seconds, control.marker)
        sweep_descendants(control.marker)
        _join(pump)
    return outcome


def _wait(processes: list[subprocess.Popen], control: RunControl) -> Outcome:
    main = processes[0]
    while True:
        try:
            code = main.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            status = "Completed" if code == 0 else "Failed"
            return Outcome(status, code, None if code == 0 else f"exited with code {_describe(code)}")
        if control.cancel.is_set():
            stop_tree(processes, 0.0 if control.force.is_set() else control.grace_seconds, control.marker)
            return Outcome("Canceled", main.returncode, "canceled by a signal to tftrain")
        if control.deadline is not None and time.monotonic() >= control.deadline:
            stop_tree(processes, control.grace_seconds, control.marker)
            return Outcome("TimedOut", main.returncode, f"max_run_duration_seconds ({control.limit_seconds}s) reached")


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"{code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def _join(pump: LogPump) -> None:
    deadline = time.monotonic() + PUMP_JOIN_SECONDS
    for thread in pump.threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in pump.threads):
        # A process outside the run's tree still holds the pipe: its output keeps going to the log.
        pump.logger.warning("a process left by the training still writes to its log; not waiting for it")

