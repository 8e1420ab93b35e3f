"""tftrain plan: what `tftrain run` would start, without starting anything."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from runner.argv import script_args
from runner.commands import add_manifest_arg, load
from runner.environment import PythonEnv
from runner.manifest import effective_target
from runner.paths import cache_dir
from runner.plan import LaunchPlan, PlanContext, build_plan
from runner.prepare import check_runnable, input_paths, task_env
from runner.rundir import RunPaths
from runner.templates import render

RUN_DIR = Path("$RUN_DIR")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("plan", help="print the environment and launch commands; run nothing")
    add_manifest_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--output-dir", type=Path, help="also write plan.json and one launch script per task here")


def run(args, logger) -> int:
    loaded = load(args, logger)
    manifest = loaded.manifest
    spec = check_runnable(loaded)
    python = str(cache_dir() / "envs" / spec.key / "bin" / "python") if spec.key else sys.executable
    env = PythonEnv(python, spec.key, reused=False)
    paths = RunPaths(RUN_DIR, manifest.outputs_dir, manifest.logs_dir)
    inputs = input_paths(loaded)
    resume = paths.root / "resume" if manifest.resume_from else None
    ctx = PlanContext(
        manifest=manifest,
        target=effective_target(manifest),
        python=python,
        workdir=paths.workdir,
        env=task_env(loaded, "$RUN_ID", paths, env, inputs, resume),
        argv_tail=tuple(script_args(manifest, inputs, resume)),
        metrics_dir=paths.metrics_dir,
    )
    plan = build_plan(ctx)
    document = {"manifest": str(loaded.path), "environment": spec.describe(), **plan.to_dict()}
    if args.output_dir:
        write_plan(plan, document, args.output_dir)
    if args.json:
        logger.text(json.dumps(document, indent=2))
    else:
        logger.text(_describe(document, plan))
    return 0


def write_plan(plan: LaunchPlan, document: dict, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "plan.json").write_text(json.dumps(document, indent=2) + "\n")
    for task in plan.tasks:
        script = directory / f"task-{task.rank}.sh"
        script.write_text(render("launch_task.sh.j2", task=task, quote=shell_word))
        script.chmod(0o755)


def shell_word(value: str) -> str:
    """shlex.quote, except that the $RUN_DIR / $RUN_ID placeholders stay expandable."""
    for placeholder in ("$RUN_DIR", "$RUN_ID"):
        if value.startswith(placeholder):
            rest = value[len(placeholder) :]
            return f'"{placeholder}"' + (shlex.quote(rest) if rest else "")
    return shlex.quote(value)


def _describe(document: dict, plan: LaunchPlan) -> str:
    lines = [
        f"manifest:    {document['manifest']}",
        f"target:      {plan.target}",
        f"launcher:    {plan.launcher}",
        f"environment: {document['environment']}",
        "tasks:",
    ]
    for task in plan.tasks:
        lines.append(f"  - {task.role} {task.index} (rank {task.rank}) on {task.host}, in {task.cwd}")
        lines.append(f"    command: {shlex.join(task.argv)}")
        for key, value in sorted(task.env.items()):
            lines.append(f"    env {key}={shlex.quote(value)}")
    return "\n".join(lines)
