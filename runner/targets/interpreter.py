"""The run's interpreter on this machine, or on a cluster's shared filesystem: what the local and the
Slurm targets share, each composing it (neither is the other). The environment is tftrain's own
interpreter, a cached virtualenv (runner.environments) or, user_managed, an interpreter as it is; the
model gate runs in it (runner.serving.check_process), started ahead while the training runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from runner.environments import (
    EnvSpec,
    check_interpreter,
    current_interpreter,
    framework_version_of,
    packages_in,
    prepare_env,
    require_tf_keras,
    tf_keras_in,
)
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.settings import GatePrestart, Settings, user_environment
from runner.targets.base import Environment, Probe, TargetState
from runner.telemetry.logger import Logger

WARM_AFTER = 3.0  # seconds of training before the gate's process is started ahead (shorter runs pay nothing)


@dataclass(frozen=True, slots=True)
class InterpreterState(TargetState):
    spec: EnvSpec  # the virtualenv the run needs, or the current interpreter
    framework: str | None = None  # user_managed: TensorFlow's version in manifest.python (None for a dry run)


def user_managed_state(loaded: LoadedManifest, dry_run: bool) -> InterpreterState:
    """A user-managed interpreter on this machine (or the shared filesystem), checked before the run
    is recorded: a missing TensorFlow, or tf-keras where the tasks need it, is one line."""
    if dry_run:
        return InterpreterState(current_interpreter())
    python = _user_python(loaded)
    framework = check_interpreter(python)
    require_tf_keras(loaded.manifest, framework, python, tf_keras_in(python))
    return InterpreterState(current_interpreter(), framework)


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


@contextmanager
def interpreter_probing(env: Environment, paths: RunPaths, warm: bool, settings: Settings | None) -> Iterator[Probe]:
    """The gate in the run's interpreter; a run that trains longer than WARM_AFTER seconds starts
    its process ahead once a CPU sits idle (runner.serving.prestart), at the lowest priority, so
    that TensorFlow is imported when the training ends. TFTRAIN_GATE_PRESTART=never: after it."""
    from runner.serving.check_process import Warming

    never = settings is not None and settings.gate_prestart == GatePrestart.NEVER
    after = WARM_AFTER if warm and not never else None
    why_not = "TFTRAIN_GATE_PRESTART=never" if never else "the manifest's model was not expected to pass the gate"
    with Warming(env.python, paths.link_runner(), paths.root / "gate-warm.log", after, why_not=why_not) as warming:
        yield warming.run


def interpreter_environment(
    loaded: LoadedManifest, state: InterpreterState, paths: RunPaths, logger: Logger, dry_run: bool
) -> Environment:
    """The environment of `state`: made (or reused) now, described for a dry run."""
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
