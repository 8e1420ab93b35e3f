"""Launchers turn a manifest into a LaunchPlan; one file each, one small protocol."""

from __future__ import annotations

from typing import Protocol

from runner.manifest.model import Manifest
from runner.plan.model import LaunchPlan, PlanContext


class Launcher(Protocol):
    name: str

    def plan(self, ctx: PlanContext) -> LaunchPlan: ...


def launcher_for(manifest: Manifest) -> Launcher:
    from runner.plan.launchers import mpi, multi_worker_mirrored, parameter_server, single

    training = manifest.distributed_training
    if training is None:
        return single
    return {"mpi": mpi, "parameter_server": parameter_server, "multi_worker_mirrored": multi_worker_mirrored}[
        training.backend
    ]


def build_plan(ctx: PlanContext) -> LaunchPlan:
    return launcher_for(ctx.manifest).plan(ctx)
