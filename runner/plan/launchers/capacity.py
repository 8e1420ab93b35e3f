"""Whether a plan fits the machine it runs on, checked when the run starts (validation cannot
know the machine, and must give the same answer everywhere). Only the local and docker targets
run every task here; the pool places tasks by each host's slots and GPUs, Kubernetes schedules."""

from __future__ import annotations

from runner.errors import UnsupportedError
from runner.manifest.model import Manifest
from runner.plan.layout import GPU_ROLES
from runner.plan.model import LaunchPlan
from runner.shared.catalog import on_this_machine
from runner.shared.machine import cpu_count, gpu_count
from runner.telemetry.logger import Logger


def check_capacity(plan: LaunchPlan, manifest: Manifest, logger: Logger, *, cuda_visible_devices: str | None) -> None:
    """More processes than CPUs: a warning (they share them). More GPU processes than GPUs: an error.
    `cuda_visible_devices`: tftrain's CUDA_VISIBLE_DEVICES (runner.settings), None when unset."""
    if not on_this_machine(plan.target):
        return
    cpus = cpu_count()
    if len(plan.tasks) > cpus:
        logger.warning(f"{len(plan.tasks)} training processes on this machine's {cpus} CPUs: they will share them")
    if not manifest.use_gpu:
        return
    wanted = sum(1 for task in plan.tasks if task.role in GPU_ROLES)
    gpus = gpu_count(cuda_visible_devices)
    if gpus is not None and wanted > gpus:
        raise UnsupportedError(
            f"use_gpu: the job runs {wanted} processes that each need a GPU, and this machine has {gpus}"
        )
