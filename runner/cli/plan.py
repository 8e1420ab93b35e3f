"""tftrain plan: what `tftrain run` would build and start, without doing either."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from runner.cli.common import add_manifest_arg, load
from runner.history.rundir import RunPaths
from runner.manifest import effective_target
from runner.manifest.legacy_keras import keras_choice
from runner.plan.model import LaunchPlan, NetworkMode
from runner.settings import MachineClients, Settings
from runner.shared.catalog import row_of
from runner.targets.factory import target_for
from runner.telemetry.logger import Logger
from runner.templates import render
from runner.training.prepare import Prepared, check_runnable, prepare

RUN_DIR = Path("$RUN_DIR")


def add_arguments(parser) -> None:
    add_manifest_arg(parser, target=True)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--output-dir", type=Path, help="also write plan.json, the Dockerfile and one launch script per task"
    )


def _machine() -> Settings:
    """What a dry run needs of the settings: the machine's GPUs (the capacity check), not the
    action's inputs or the workflow (a plan publishes nothing and fetches nothing)."""
    return Settings(
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), machine=MachineClients.from_environment(os.environ)
    )


def run(args, logger: Logger) -> int:
    loaded = load(args, logger)
    evaluation = _evaluation_note(loaded.manifest)
    if evaluation:  # every seed runs this plan, with its own TFTRAIN_SEED: seed 0's is shown
        from runner.verdict.seeds import seed_manifest

        loaded = seed_manifest(loaded, 0)
    manifest = loaded.manifest
    paths = RunPaths(RUN_DIR, manifest.outputs_dir, manifest.logs_dir)
    with open("/dev/null", "w") as discarded:
        quiet = Logger(discarded, settings=logger.settings)  # dry-run chatter ("environment: …") stays out of the plan
        try:
            settings = _machine()
            target = target_for(effective_target(manifest), settings)
            state = check_runnable(loaded, target, dry_run=True)
            prepared = prepare(loaded, target, state, "$RUN_ID", paths, None, quiet, settings, dry_run=True)
        finally:
            quiet.flush()
    document = {"manifest": str(loaded.path), "environment": prepared.env.description, **prepared.plan.to_dict()}
    keras = keras_choice(manifest).note
    if keras:
        document = {**document, "keras": keras}
    if evaluation:
        document = {**document, "evaluation": evaluation}
    if manifest.model.replay is not None:
        document = {**document, "replay": _replay_note(manifest.model.replay)}
    dockerfile = prepared.env.details.get("dockerfile")
    if prepared.env.image:
        document["image"] = prepared.env.image
    row = row_of(prepared.plan.target)
    submitted = prepared.plan.files.get(row.plan_file) if row.plan_file else None  # what the target hands its cluster
    if args.output_dir:
        write_plan(prepared, document, args.output_dir)
    if submitted and row.plan_file_caption is None and not args.json:
        logger.text(submitted.rstrip("\n"))
        return 0
    if args.json:
        logger.text(json.dumps({**document, "dockerfile": dockerfile} if dockerfile else document, indent=2))
    else:
        logger.text(_describe(document, prepared.plan, dockerfile))
        if submitted:  # the slurm target's batch script, as sbatch gets it
            logger.text(
                f"{row.plan_file_caption}:\n" + "\n".join("  " + line for line in submitted.rstrip("\n").splitlines())
            )
    return 0


def _evaluation_note(manifest) -> str | None:
    spec = manifest.evaluation
    if spec is None:
        return None
    seeded = "the frameworks seeded from it" if spec.set_seed else "evaluation.set_seed: false"
    return (
        f"{spec.seeds} run{'s' if spec.seeds > 1 else ''} of this plan (TFTRAIN_SEED 0…{spec.seeds - 1}, {seeded}; "
        f"seed 0's shown), {spec.per_example} kept as evidence, seed 0's model registered"
    )


def _replay_note(spec) -> str:
    latency = f", p99 ≤ {spec.max_latency_ratio:g}× the baseline's" if spec.max_latency_ratio is not None else ""
    return (
        f"after the gate, up to {spec.max_requests} requests of {spec.requests} replayed against {spec.against}; "
        f"registered only with ≥ {spec.min_agreement:.1%} the same answers (|Δ| ≤ {spec.tolerance:g}){latency}"
    )


def write_plan(prepared: Prepared, document: dict, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plan.json").write_text(json.dumps(document, indent=2) + "\n")
    spec = prepared.env.details.get("spec")
    if spec is not None:  # the docker build context, to `docker build` by hand
        context = directory / "image"
        context.mkdir(exist_ok=True)
        for name, data in spec.context().items():
            (context / name).write_bytes(data)
    for name, content in prepared.plan.files.items():  # the hostfile, the Kubernetes job
        (directory / name).write_text(content)
    for task in prepared.plan.tasks:
        script = directory / f"task-{task.rank}.sh"
        script.write_text(render("launch_task.sh.j2", task=task, quote=shell_word, masked=prepared.plan.secret_names))
        script.chmod(0o755)


def shell_word(value: str) -> str:
    """shlex.quote, except that the $RUN_DIR / $RUN_ID placeholders stay expandable."""
    for placeholder in ("$RUN_DIR", "$RUN_ID"):
        if value.startswith(placeholder):
            rest = value[len(placeholder) :]
            return f'"{placeholder}"' + (shlex.quote(rest) if rest else "")
    return shlex.quote(value)


def _describe(document: dict, plan: LaunchPlan, dockerfile: str | None) -> str:
    lines = [
        f"manifest:    {document['manifest']}",
        f"target:      {plan.target}",
        f"launcher:    {plan.launcher}",
        f"environment: {document['environment']}",
    ]
    if document.get("keras"):
        lines.append(f"keras:       {document['keras']}")
    if document.get("evaluation"):
        lines.append(f"evaluation:  {document['evaluation']}")
    if document.get("replay"):
        lines.append(f"replay:      {document['replay']}")
    if plan.container is not None:
        spec = plan.container
        pool = spec.network_mode == NetworkMode.POOL  # nothing is mounted on a pool's hosts: files are copied
        lines.append(
            f"container:   image {spec.image}, user {spec.user or 'root'}, "
            + ("network of each task's host" if pool else f"network {spec.network_mode}")
            + (f", shm {spec.shm_size}" if spec.shm_size else "")
            + (f", memory {spec.memory}" if spec.memory else "")
            + (", the placed GPUs" if spec.gpus and pool else ", all GPUs" if spec.gpus else "")
            + (", stderr joined to stdout" if spec.one_stream else "")
        )
        for mount in spec.mounts:
            if pool:
                lines.append(f"  {'copy in' if mount.read_only else 'copy back'} {mount.source} → {mount.target}")
            else:
                lines.append(f"  mount {mount.source} → {mount.target} ({'ro' if mount.read_only else 'rw'})")
    driver = document.get("driver")
    if driver:
        lines.append(f"driver:      {driver['command']}")
    lines.append("tasks:")
    for task in document["tasks"]:
        lines.append(f"  - {task['role']} {task['index']} (rank {task['rank']}) on {task['host']}, in {task['cwd']}")
        lines.append(f"    command: {task['command']}")
        for key, value in task["env"].items():
            lines.append(f"    env {key}={shlex.quote(value)}")
    if dockerfile:
        lines += ["Dockerfile:", *("  " + line for line in dockerfile.splitlines())]
    return "\n".join(lines)
