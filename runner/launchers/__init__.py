"""Launchers turn a manifest into a LaunchPlan; one file each, one small protocol."""

from __future__ import annotations

from typing import Protocol

from runner.manifest.model import Manifest
from runner.plan import LaunchPlan, PlanContext, unsupported_backend


class Launcher(Protocol):
    name: str

    def plan(self, ctx: PlanContext) -> LaunchPlan: ...


def launcher_for(manifest: Manifest) -> Launcher:
    from runner.launchers import single

    training = manifest.distributed_training
    if training is None:
        return single
    raise unsupported_backend(training.backend)
