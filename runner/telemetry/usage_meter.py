"""A run's usage, measured around Running (runner.training.pipeline): the allocation from the plan,
the prices from compute.cost or the target, the sampler's figures; left on the Training."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

from runner.plan.launchers.capacity import GPU_ROLES
from runner.targets.catalog import ON_THIS_MACHINE
from runner.telemetry.usage import account, prices_of
from runner.telemetry.usage_report import brief
from runner.telemetry.usage_sampler import GpuMonitor, UsageSampler


def _cgroup_of(name: str):
    def find() -> Path | None:
        from runner.targets.local.cgroup import nearby

        cgroup = nearby(name)
        return cgroup.path if cgroup is not None else None

    return find


@contextmanager
def metering(ctx, training):
    """Around the training: GPUs sampled where the run trains on this machine with use_gpu, the
    cgroup's processes on the local target; `training.usage` is set however Running ends."""
    manifest, plan = ctx.manifest, training.prepared.plan
    prices = prices_of(manifest.compute.cost or ctx.target.prices(ctx.checked))
    gpu_processes = sum(1 for task in plan.tasks if task.role in GPU_ROLES) if manifest.use_gpu else 0
    gpus = None
    if manifest.use_gpu and plan.target in ON_THIS_MACHINE:
        gpus = GpuMonitor.open(visible=ctx.settings.cuda_visible_devices, warn=ctx.logger.warning)
    cgroup = _cgroup_of(ctx.control.cgroup) if plan.target == "local" and ctx.control.cgroup else None
    sampler = UsageSampler(training.recorder.record, gpus, cgroup, ctx.logger.warning)
    started = time.monotonic()
    try:
        with sampler:
            yield sampler
    finally:
        training.usage = account(
            time.monotonic() - started, len(plan.tasks), gpu_processes, prices,
            cpu_seconds_used=sampler.cpu_seconds, peak_rss_bytes=sampler.memory.peaks, gpus=sampler.gpu_stats(),
        )
        ctx.logger.info(f"usage: {brief(training.usage)}")
