"""The local target: the plan's processes run on this machine, each in its own process group,
all in the run's cgroup (see processes.py), in the current interpreter or a cached virtualenv
(runner.targets.interpreter, which the Slurm target composes too)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from shutil import which

from runner.environments import env_spec
from runner.errors import UnsupportedError
from runner.history.rundir import RunPaths
from runner.history.states import RunStatus
from runner.manifest import LoadedManifest
from runner.plan.model import LaunchPlan, TaskSpec
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, follow
from runner.targets.interpreter import (
    InterpreterState,
    interpreter_environment,
    interpreter_probing,
    task_environment,
    user_managed_state,
)
from runner.targets.local.processes import contain
from runner.targets.supervise import by_policy, supervise
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump

PUMP_JOIN_SECONDS = 10.0


class LocalTarget(Target):
    name = "local"

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> InterpreterState:
        if loaded.manifest.use_gpu and which("nvidia-smi") is None:
            raise UnsupportedError(
                "use_gpu: true, but this machine has no NVIDIA GPU (nvidia-smi not found); "
                "set use_gpu: false to train on the CPU, or run on a GPU runner"
            )
        training = loaded.manifest.distributed_training
        if training is not None and training.backend == "mpi":
            program = training.launcher
            if which(program) is None:
                raise UnsupportedError(
                    f"distributed_training.launcher: {program} not found on PATH; install Open MPI "
                    "(Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev cmake g++)"
                    + (" and Horovod" if program == "horovodrun" else "")
                )
        if loaded.manifest.user_managed:
            return user_managed_state(loaded, dry_run)
        return InterpreterState(env_spec(loaded.manifest, loaded.source_dir))

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        with interpreter_probing(env, paths, warm, self.settings) as probe:
            yield probe

    def environment(
        self, loaded: LoadedManifest, state: InterpreterState, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        return interpreter_environment(loaded, state, paths, logger, dry_run)

    def process_group(self, control: RunControl):
        """The run's cgroup (made when execute starts): its processes and their CPU time."""
        if control.cgroup is None:
            return None
        from runner.targets.local.cgroup import nearby

        return lambda: nearby(control.cgroup)

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        tree = contain(control.marker, control.cgroup, logger.warning)
        started: list[tuple[TaskSpec, subprocess.Popen]] = []
        try:
            for task in plan.processes:
                try:
                    process, fd = tree.spawn(task.argv, Path(task.cwd), task_environment(task.env, self.gpus))
                except OSError as exc:
                    return Outcome(RunStatus.FAILED, None, f"cannot start {task.argv[0]}: {exc.strerror}")
                follow(pump, fd, plan, task, sinks)
                started.append((task, process))
            tree.guard(_run_marker(plan, control))

            def poll() -> list[tuple[TaskSpec, int | None]]:
                return [(task, process.poll()) for task, process in started]

            def stop(grace: float) -> None:
                tree.stop(grace, control.force)

            outcome = supervise(by_policy(poll, stop, plan.success_policy, control), stop, control)
        finally:
            tree.close(control.grace_seconds, control.force)  # no grace to wait out when all have ended
            _join(pump)
        return outcome


def _run_marker(plan: LaunchPlan, control: RunControl) -> str:
    """NAME=VALUE in the environment of this run's processes and no other's: its outputs directory
    (a run id alone repeats across TFTRAIN_HOMEs)."""
    outputs = plan.tasks[0].env.get("TFTRAIN_OUTPUTS_DIR") if plan.tasks else None
    return f"TFTRAIN_OUTPUTS_DIR={outputs}" if outputs else control.marker


def _join(pump: LogPump) -> None:
    deadline = time.monotonic() + PUMP_JOIN_SECONDS
    for thread in pump.threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in pump.threads):
        # A process outside the run's tree still holds the pipe: its output keeps going to the log.
        pump.logger.warning("a process left by the training still writes to its log; not waiting for it")
