"""Preparing: snapshot the source, get the Python environment, resolve inputs and resume point,
and plan the launch. Everything the Running phase needs comes back as one `Prepared`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

import runner
from runner.argv import script_args
from runner.environment import EnvSpec, PythonEnv, env_spec, installed_framework_version, prepare_env
from runner.errors import PreparingError, UnsupportedError
from runner.gitinfo import git_info
from runner.logger import Logger
from runner.manifest import LoadedManifest, effective_target
from runner.plan import LaunchPlan, PlanContext, build_plan
from runner.resume import resolve_resume
from runner.rundir import RunPaths
from runner.snapshot import LARGE_SNAPSHOT, take_snapshot
from runner.store import Store


@dataclass(frozen=True)
class Prepared:
    plan: LaunchPlan
    env: PythonEnv
    git: dict


def check_runnable(loaded: LoadedManifest) -> EnvSpec:
    """What can be refused before a run is even recorded: unsupported targets, backends, conda."""
    from runner.launchers import launcher_for
    from runner.targets import target_for

    target_for(effective_target(loaded.manifest))
    launcher_for(loaded.manifest)
    if loaded.manifest.use_gpu:
        _check_gpu()
    return env_spec(loaded.manifest, loaded.source_dir)


def _check_gpu() -> None:
    from shutil import which

    if which("nvidia-smi") is None:
        raise UnsupportedError(
            "use_gpu: true, but this machine has no NVIDIA GPU (nvidia-smi not found); "
            "set use_gpu: false to train on the CPU, or run on a GPU runner"
        )


def prepare(loaded: LoadedManifest, spec: EnvSpec, run_id: str, paths: RunPaths, store: Store, logger: Logger) -> Prepared:
    manifest = loaded.manifest
    paths.create()
    size = take_snapshot(
        loaded.source_dir, paths.workdir, exclude=(manifest.outputs_dir, manifest.logs_dir), skip=(store.home,)
    )
    if size > LARGE_SNAPSHOT:
        logger.warning(f"the snapshot of {loaded.source_dir} is {size >> 20} MB; add a .tftrainignore to leave data out")
    paths.outputs.mkdir(parents=True, exist_ok=True)
    paths.logs.mkdir(parents=True, exist_ok=True)
    git = git_info(loaded.source_dir)
    env = prepare_env(spec, loaded.source_dir, logger, paths.prepare_log)
    logger.info(f"environment: {spec.describe()}{' (reused)' if env.reused and env.is_venv else ''}")
    inputs = input_paths(loaded)
    resume = None
    if manifest.resume_from:
        resume = resolve_resume(manifest.resume_from, loaded.base_dir, store, paths.root / "resume")
        logger.info(f"resuming from {manifest.resume_from}: {resume}")
    if env.is_venv:
        _link_runner(paths)
    ctx = PlanContext(
        manifest=manifest,
        target=effective_target(manifest),
        python=env.python,
        workdir=paths.workdir,
        env=task_env(loaded, run_id, paths, env, inputs, resume),
        argv_tail=tuple(script_args(manifest, inputs, resume)),
        metrics_dir=paths.metrics_dir,
    )
    plan = build_plan(ctx)
    _write_lock(loaded, paths, spec, env, git, plan)
    return Prepared(plan, env, git)


def input_paths(loaded: LoadedManifest) -> dict[str, Path]:
    paths = {}
    for name, spec in loaded.manifest.inputs.items():
        if "://" in spec.source:
            raise UnsupportedError(
                f"inputs.{name}.source: {spec.source!r}: only local paths are available in this version of tftrain"
            )
        path = (loaded.base_dir / spec.source).resolve()
        if not path.exists():
            raise PreparingError(f"inputs.{name}.source: {path} does not exist")
        paths[name] = path
    return paths


def task_env(loaded, run_id: str, paths: RunPaths, env: PythonEnv, inputs, resume) -> dict[str, str]:
    """The variables tftrain sets for every task (on top of the inherited environment)."""
    manifest = loaded.manifest
    values = {
        "PYTHONUNBUFFERED": "1",
        "TFTRAIN_RUN_ID": run_id,
        "TFTRAIN_OUTPUTS_DIR": str(paths.outputs),
        "TFTRAIN_LOGS_DIR": str(paths.logs),
    }
    for name, path in inputs.items():
        values[f"TFTRAIN_INPUT_{name.upper().replace('-', '_')}"] = str(path)
    if resume is not None:
        values["TFTRAIN_RESUME_FROM"] = str(resume)
    if env.is_venv:
        # The virtualenv has no tftrain: `import runner` (log_metric, MetricsCallback) comes from here.
        existing = os.environ.get("PYTHONPATH")
        values["PYTHONPATH"] = str(paths.pythonpath) + (os.pathsep + existing if existing else "")
    for key, value in manifest.environment_variables.items():
        values[key] = _env_text(value)
    return values


def _link_runner(paths: RunPaths) -> None:
    paths.pythonpath.mkdir(exist_ok=True)
    link = paths.pythonpath / "runner"
    if not link.exists():
        link.symlink_to(Path(runner.__file__).parent, target_is_directory=True)


def _env_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _write_lock(loaded, paths: RunPaths, spec: EnvSpec, env: PythonEnv, git: dict, plan: LaunchPlan) -> None:
    lock = {
        "tftrain_version": runner.__version__,
        "manifest": loaded.manifest.model_dump(mode="json", by_alias=True),
        "manifest_path": str(loaded.path),
        "environment": {
            "python": env.python,
            "python_version": spec.python_version,
            "virtualenv": env.key,
            "requirements": list(spec.requirements),
            "framework_version": installed_framework_version() if not env.is_venv else _venv_framework(env),
        },
        "git": git,
        "plan": plan.to_dict(),
    }
    paths.lock.write_text(yaml.safe_dump(lock, sort_keys=False), encoding="utf-8")


def _venv_framework(env: PythonEnv) -> str | None:
    site = list(Path(env.python).parent.parent.glob("lib/python*/site-packages"))
    for directory in site:
        for dist in directory.glob("tensorflow*.dist-info"):
            name, _, version = dist.name[: -len(".dist-info")].partition("-")
            if name.replace("_", "-") in ("tensorflow", "tensorflow-cpu"):
                return version
    return None

