"""Preparing: snapshot the source, get the environment (virtualenv or image), fetch the inputs,
resolve the resume point, and plan the launch. `tftrain plan` runs the same steps dry."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from runner.compat import azureml_env, azureml_reason, startup_env
from runner.environments.prepared import Environment
from runner.errors import PreparingError
from runner.history.rundir import RunPaths, RuntimePaths
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.manifest.fields import env_text
from runner.manifest.legacy_keras import keras_choice
from runner.plan.argv import script_args
from runner.plan.launchers import build_plan
from runner.plan.launchers.capacity import check_capacity
from runner.plan.model import LaunchPlan, PlanContext
from runner.settings import Settings
from runner.shared.catalog import bare_here
from runner.targets.base import Target, TargetState
from runner.telemetry.logger import Logger
from runner.training.inputs import fetch_inputs
from runner.training.snapshot import LARGE_SNAPSHOT, take_snapshot


class Prepared(NamedTuple):
    plan: LaunchPlan
    env: Environment
    inputs: dict[str, Path]  # name → where it was fetched to
    secrets: tuple[str, ...]  # values to mask in every log line


def check_runnable(loaded: LoadedManifest, target: Target, dry_run: bool = False) -> TargetState:
    """What can be refused before a run is even recorded: unsupported backends, a GPU asked for
    where there is none, conda on the local target, model.replay's requests that cannot be read."""
    from runner.plan.launchers import launcher_for

    launcher_for(loaded.manifest)
    # a request file that cannot be replayed is said now, not after the training
    if loaded.manifest.model.replay is not None:
        from runner.replay.promotion import check_requests

        check_requests(loaded.manifest.model.replay, loaded.source_dir)
    return target.check(loaded, dry_run)


def prepare(
    loaded: LoadedManifest,
    target: Target,
    state: TargetState,
    run_id: str,
    paths: RunPaths,
    store: Store | None,
    logger: Logger,
    settings: Settings,
    dry_run: bool = False,
) -> Prepared:
    """`settings`: what runner/cli resolved (for a dry run, which fetches nothing, the machine's part alone)."""
    manifest = loaded.manifest
    if not dry_run:
        _snapshot(loaded, paths, store, logger)
    env = target.environment(loaded, state, paths, logger, dry_run)
    logger.info(f"environment: {env.description}")
    keras = keras_choice(manifest)
    if keras.note:
        logger.info(f"keras: {keras.note}")
    inputs = fetch_inputs(loaded, logger, dry_run)
    resume = None
    if manifest.resume_from:
        from runner.training.resume import resolve_resume  # the registry, only when resuming

        resume = (
            paths.root / "resume"
            if dry_run
            else resolve_resume(manifest.resume_from, loaded.base_dir, store, paths.root / "resume", logger, settings)
        )
        logger.info(f"resuming from {manifest.resume_from}: {resume}")
    secrets = secret_values(loaded, dry_run)
    if not dry_run:
        _warn_secret_files(loaded, paths, logger)
    runtime, container = target.runtime(loaded, env, paths, inputs, resume)
    variables = task_env(loaded, run_id, runtime, env)
    compat = azureml_reason(loaded, env.python if bare_here(target.name) and not dry_run else None)
    if compat:
        logger.info(f"azureml compatibility: on ({compat}): Run.get_context() and run.log reach this run")
        variables.update(azureml_env(loaded, runtime, variables.get("PYTHONPATH")))
    startup = startup_env(loaded, runtime, variables.get("PYTHONPATH"), target.stops_to_resume(loaded))
    variables.update(startup)
    if (env.isolated or compat or startup) and not dry_run:
        paths.link_runner()
    ctx = PlanContext(
        manifest=manifest,
        target=target.name,
        python=env.python,
        runtime=runtime,
        env={**variables, **secrets},
        argv_tail=tuple(script_args(manifest, runtime.inputs, runtime.resume)),
        placement=env.placement,
    )
    plan = replace(build_plan(ctx), container=container, secret_names=frozenset(secrets))
    plan = target.finalize(plan, loaded, run_id)
    check_capacity(plan, manifest, logger, cuda_visible_devices=settings.cuda_visible_devices)
    return Prepared(plan, env, inputs, tuple(value for value in secrets.values() if value))


def _snapshot(loaded: LoadedManifest, paths: RunPaths, store: Store | None, logger: Logger) -> None:
    manifest = loaded.manifest
    paths.create()
    skip = (store.home,) if store else ()
    size = take_snapshot(loaded.source_dir, paths.workdir, exclude=(manifest.outputs_dir, manifest.logs_dir), skip=skip)
    if size > LARGE_SNAPSHOT:
        logger.warning(
            f"the snapshot of {loaded.source_dir} is {size >> 20} MB; add a .tftrainignore to leave data out"
        )
    paths.outputs.mkdir(parents=True, exist_ok=True)
    paths.logs.mkdir(parents=True, exist_ok=True)


def _warn_secret_files(loaded: LoadedManifest, paths: RunPaths, logger: Logger) -> None:
    """One warning per file of the snapshot that holds a secret's value (a signing key kept in the
    source directory is copied into every run): registration and publishing leave it out."""
    if not loaded.manifest.secrets:  # nothing to look for: the scan (and the model's checksums) stay off the start
        return
    from runner.history.secret_scan import secret_files, warning
    from runner.history.secret_scan import secret_values as values_of

    for relative, secret in secret_files(paths.workdir, values_of(loaded.manifest.secrets)).items():
        logger.warning(warning(str(loaded.source_dir), relative, secret))


def secret_values(loaded: LoadedManifest, dry_run: bool) -> dict[str, str]:
    """`secrets:` names variables of tftrain's own environment handed to the training at run time."""
    values = {}
    signing = loaded.manifest.model.signing
    key_name = signing.private_key_secret if signing is not None else None
    for name in loaded.manifest.secrets:
        value = os.environ.get(name)
        if name == key_name:  # tftrain's own, withheld from every process it starts (runner.history.signing)
            from runner.history.signing import held_key

            value = held_key(name)
        if value is None and not dry_run:
            raise PreparingError(f"secrets: {name} is not set in tftrain's environment")
        values[name] = value or ""
    if key_name is not None:  # it signs the model: the training never sees it
        key = values.pop(key_name)
        if not dry_run:
            from runner.history.signing import ready_to_sign

            ready_to_sign(key, key_name)  # a bad key is refused before the training, not after it
    return values


def task_env(loaded: LoadedManifest, run_id: str, runtime: RuntimePaths, env: Environment) -> dict[str, str]:
    """The variables tftrain sets for every task (on top of what the target provides)."""
    manifest = loaded.manifest
    values = {
        "PYTHONUNBUFFERED": "1",
        "TFTRAIN_RUN_ID": run_id,
        "TFTRAIN_OUTPUTS_DIR": runtime.outputs,
        "TFTRAIN_LOGS_DIR": runtime.logs,
    }
    for name, path in runtime.inputs.items():
        values[f"TFTRAIN_INPUT_{name.upper().replace('-', '_')}"] = path
    if runtime.resume is not None:
        values["TFTRAIN_RESUME_FROM"] = runtime.resume
    if env.isolated:
        # The virtualenv or image has no tftrain: `import runner` (log_metric, MetricsCallback) comes from here.
        values["PYTHONPATH"] = runtime.pythonpath
    for key, value in manifest.environment_variables.items():
        values[key] = env_text(value)
    return values
