"""Launchers turn a manifest into a LaunchPlan; one file each, one small protocol."""

from __future__ import annotations

from typing import Protocol

from runner.manifest.model import Manifest
from runner.plan.model import LaunchPlan, PlanContext


class Launcher(Protocol):
    name: str

    def plan(self, ctx: PlanContext) -> LaunchPlan: ...


def launcher_for(manifest: Manifest) -> Launcher:
    """The backend's module alone: a single process's run does not load the others (nor socket,
    which finds their free ports) before its script starts."""
    training = manifest.distributed_training
    if training is None:
        from runner.plan.launchers import single

        return single
    if training.backend == "mpi":
        from runner.plan.launchers import mpi

        return mpi
    if training.backend == "parameter_server":
        from runner.plan.launchers import parameter_server

        return parameter_server
    from runner.plan.launchers import multi_worker_mirrored

    return multi_worker_mirrored


def build_plan(ctx: PlanContext) -> LaunchPlan:
    return launcher_for(ctx.manifest).plan(ctx)
