"""One process: `python entry_script script_params…` in the snapshot."""

from __future__ import annotations

from runner.plan.model import LaunchPlan, PlanContext, Role, TaskSpec, check_metrics_ranks

name = "single"


def plan(ctx: PlanContext) -> LaunchPlan:
    env = {**ctx.env, "TFTRAIN_RANK": "0", "TFTRAIN_METRICS_FILE": ctx.runtime.metrics_file(0)}
    task = TaskSpec(
        role=Role.MAIN,
        index=0,
        rank=0,
        host=ctx.placement.name("main 0") if ctx.placement else "localhost",
        argv=ctx.script_argv,
        env=env,
        cwd=ctx.runtime.workdir,
    )
    return LaunchPlan(
        launcher=name, target=ctx.target, tasks=(task,), metrics_ranks=check_metrics_ranks(ctx.manifest, 1)
    )
