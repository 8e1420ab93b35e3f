"""Whether a plan fits the machine it runs on, checked when the run starts (validation cannot
know the machine, and must give the same answer everywhere). Only the local and docker targets
run every task here; the pool places tasks by each host's slots and GPUs, Kubernetes schedules."""

from __future__ import annotations

import os
import subprocess

from runner.errors import UnsupportedError
from runner.telemetry.logger import Logger
from runner.manifest.model import Manifest
from runner.plan.layout import GPU_ROLES
from runner.plan.model import LaunchPlan
from runner.targets.catalog import ON_THIS_MACHINE



def check_capacity(plan: LaunchPlan, manifest: Manifest, logger: Logger, *, cuda_visible_devices: str | None) -> None:
    """More processes than CPUs: a warning (they share them). More GPU processes than GPUs: an error.
    `cuda_visible_devices`: tftrain's CUDA_VISIBLE_DEVICES (runner.settings), None when unset."""
    if plan.target not in ON_THIS_MACHINE:
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


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_count(cuda_visible_devices: str | None) -> int | None:
    """GPUs this machine lets tftrain use (`nvidia-smi -L`, within `cuda_visible_devices`: tftrain's
    CUDA_VISIBLE_DEVICES, as runner.settings read it); None: unknown."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    named = named_gpus(cuda_visible_devices)
    return count if named is None else min(count, len(named))


def named_gpus(cuda_visible_devices: str | None) -> list[str] | None:
    """The GPUs CUDA_VISIBLE_DEVICES lets a process use, as it names them (indices or UUIDs): its
    entries up to the first one CUDA ignores the rest from (-1, an empty one, one named twice —
    never counted twice, so two trials never get the same GPU); None when it is unset or empty,
    which leaves every GPU visible."""
    if cuda_visible_devices is None or not cuda_visible_devices.strip():
        return None
    named: list[str] = []
    for item in (part.strip() for part in cuda_visible_devices.split(",")):
        if not item or item.startswith("-") or item in named:
            break
        named.append(item)
    return named
