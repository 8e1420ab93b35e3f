"""MultiWorkerMirroredStrategy: W workers, only workers in TF_CONFIG (worker 0 is the chief).
The job succeeds when every worker has ended well."""

from __future__ import annotations

from runner.plan.launchers.tfconfig import tasks_for
from runner.plan.layout import task_layout
from runner.plan.model import LaunchPlan, PlanContext, SuccessPolicy, check_metrics_ranks

name = "multi_worker_mirrored"


def plan(ctx: PlanContext) -> LaunchPlan:
    training = ctx.manifest.distributed_training
    tasks = tasks_for(
        ctx, [(slot.role.value, slot.index) for slot in task_layout(ctx.manifest)], {"worker"}, training.base_port
    )
    return LaunchPlan(
        launcher=name,
        target=ctx.target,
        tasks=tuple(tasks),
        metrics_ranks=check_metrics_ranks(ctx.manifest, len(tasks)),
        success_policy=SuccessPolicy.ALL_WORKERS,
    )
