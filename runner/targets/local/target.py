"""The local target: the plan's processes run on this machine, each in its own process group,
all in the run's cgroup (see processes.py), in the current interpreter or a cached virtualenv
(runner.environments)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shutil import which

from runner.environments import (
    EnvSpec, check_interpreter, current_interpreter, env_spec, framework_version_of, packages_in, prepare_env, require_tf_keras, tf_keras_in,
)
from runner.errors import UnsupportedError
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump
from runner.manifest import LoadedManifest
from runner.plan.model import LaunchPlan, TaskSpec
from runner.targets.supervise import by_policy, supervise
from runner.targets.local.processes import contain
from runner.history.rundir import RunPaths
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, TargetState, follow
from runner.history.record import RunStatus
from runner.settings import GatePrestart, user_environment

PUMP_JOIN_SECONDS = 10.0
WARM_AFTER = 3.0  # seconds of training before the gate's process is started ahead (shorter runs pay nothing)


@dataclass(frozen=True, slots=True)
class LocalState(TargetState):
    spec: EnvSpec  # the virtualenv the run needs, or the current interpreter
    framework: str | None = None  # user_managed: TensorFlow's version in manifest.python (None for a dry run)


def user_managed_state(loaded: LoadedManifest, dry_run: bool) -> LocalState:
    """A user-managed interpreter on this machine (or the shared filesystem), checked before the run
    is recorded: a missing TensorFlow, or tf-keras where the tasks need it, is one line."""
    if dry_run:
        return LocalState(current_interpreter())
    python = _user_python(loaded)
    framework = check_interpreter(python)
    require_tf_keras(loaded.manifest, framework, python, tf_keras_in(python))
    return LocalState(current_interpreter(), framework)


def _user_python(loaded: LoadedManifest) -> str:
    """manifest.python (relative to the manifest's directory when it names a path), else tftrain's own."""
    python = loaded.manifest.python
    if python is None:
        return sys.executable
    return str(loaded.base_dir / python) if "/" in python else python


def _as_it_is(python: str, framework: str | None) -> Environment:
    """user_managed: the interpreter as it is; another interpreter than tftrain's has no tftrain (isolated)."""
    described = f"user-managed interpreter {python}" + (f" (TensorFlow {framework})" if framework else "")
    details = {"user_managed": True, "python": python, **({"framework_version": framework} if framework else {})}
    return Environment(python, described, reused=True, isolated=python != sys.executable, details=details)


class LocalTarget(Target):
    name = "local"

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> LocalState:
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
        return LocalState(env_spec(loaded.manifest, loaded.source_dir))

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        """The gate in the run's interpreter; a run that trains longer than WARM_AFTER seconds starts
        its process ahead once a CPU sits idle (runner.serving.prestart), at the lowest priority, so
        that TensorFlow is imported when the training ends. TFTRAIN_GATE_PRESTART=never: after it."""
        from runner.serving.check_process import Warming

        never = self.settings is not None and self.settings.gate_prestart == GatePrestart.NEVER
        after = WARM_AFTER if warm and not never else None
        why_not = "TFTRAIN_GATE_PRESTART=never" if never else "the manifest's model was not expected to pass the gate"
        with Warming(env.python, paths.link_runner(), paths.root / "gate-warm.log", after, why_not=why_not) as warming:
            yield warming.run

    def environment(self, loaded: LoadedManifest, state: LocalState, paths: RunPaths, logger: Logger, dry_run: bool) -> Environment:
        if loaded.manifest.user_managed:
            return _as_it_is(_user_python(loaded), state.framework)
        spec = state.spec
        if dry_run:
            return Environment(spec.python_path(), spec.describe(), reused=False, isolated=spec.key is not None)
        env = prepare_env(spec, loaded.source_dir, logger, paths.prepare_log)
        described = spec.describe() + (" (reused)" if env.reused and env.is_venv else "")
        details = {"virtualenv": env.key, "requirements": list(spec.requirements)}

        def inventory() -> dict:  # every package's metadata: read while the training runs
            packages = packages_in(env)
            return {"framework_version": framework_version_of(packages), "packages": packages}

        return Environment(env.python, described, env.reused, isolated=env.is_venv, details=details, inventory=inventory)

    def process_group(self, control: RunControl):
        """The run's cgroup (made when execute starts): its processes and their CPU time."""
        if control.cgroup is None:
            return None
        from runner.targets.local.cgroup import nearby

        return lambda: nearby(control.cgroup)

    def execute(self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger) -> Outcome:
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


def task_environment(task_env: dict[str, str], gpus: str | None = None) -> dict[str, str]:
    """The inherited environment plus the task's; PYTHONPATH entries are joined, not replaced.
    `gpus` (Target.gpus): where it is not what tftrain was given, the run's own share of the GPUs
    (a sweep's trial), as CUDA_VISIBLE_DEVICES over anything else."""
    inherited = user_environment(os.environ)
    merged = {**inherited, **task_env}
    if "PYTHONPATH" in task_env and os.environ.get("PYTHONPATH"):
        merged["PYTHONPATH"] = task_env["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]
    if gpus is not None and gpus != inherited.get("CUDA_VISIBLE_DEVICES"):
        merged["CUDA_VISIBLE_DEVICES"] = gpus
    return merged


def _join(pump: LogPump) -> None:
    deadline = time.monotonic() + PUMP_JOIN_SECONDS
    for thread in pump.threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in pump.threads):
        # A process outside the run's tree still holds the pipe: its output keeps going to the log.
        pump.logger.warning("a process left by the training still writes to its log; not waiting for it")

