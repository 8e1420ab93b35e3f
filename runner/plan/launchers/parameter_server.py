"""Parameter-server training: chief, workers, parameter servers (and an evaluator), one process
each, every one with its own TF_CONFIG. Parameter servers never end on their own: the job ends
with the chief (or all workers), and the rest is stopped."""

from __future__ import annotations

from runner.plan.launchers.tfconfig import tasks_for
from runner.plan.layout import task_layout
from runner.plan.model import LaunchPlan, PlanContext, SuccessPolicy, check_metrics_ranks

name = "parameter_server"


def plan(ctx: PlanContext) -> LaunchPlan:
    training = ctx.manifest.distributed_training
    roles = [(slot.role.value, slot.index) for slot in task_layout(ctx.manifest)]
    in_cluster = {"chief", "worker", "ps"} | ({"evaluator"} if training.evaluator_in_cluster else set())
    tasks = tasks_for(ctx, roles, in_cluster, training.base_port)
    return LaunchPlan(
        launcher=name,
        target=ctx.target,
        tasks=tuple(tasks),
        metrics_ranks=check_metrics_ranks(ctx.manifest, len(tasks)),
        success_policy=SuccessPolicy(training.success_policy),
    )
