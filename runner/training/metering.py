"""A run's usage, measured around Running (runner.training.pipeline) less any wait in a scheduler's queue: the
allocation from the plan,
the prices from compute.cost or the target, the sampler's figures; left on the Training."""

from __future__ import annotations

import time
from contextlib import contextmanager

from runner.plan.layout import GPU_ROLES
from runner.shared.catalog import on_this_machine
from runner.telemetry.usage_sampler import GpuMonitor, UsageSampler


@contextmanager
def metering(ctx, training):
    """Around the training: GPUs sampled where the run trains on this machine with use_gpu, its
    processes where the target can find them (Target.process_group); `training.usage` is set however Running ends."""
    manifest, plan = ctx.manifest, training.prepared.plan
    prices = manifest.compute.cost or ctx.target.prices(ctx.checked)
    gpu_processes = ctx.target.allocated_gpus(ctx.checked)  # a scheduler's request, where the target makes one
    if gpu_processes is None:
        gpu_processes = sum(1 for task in plan.tasks if task.role in GPU_ROLES) if manifest.use_gpu else 0
    gpus = None
    if manifest.use_gpu and on_this_machine(plan.target):
        gpus = GpuMonitor.open(visible=ctx.settings.cuda_visible_devices, warn=ctx.logger.warning)
    group = ctx.target.process_group(ctx.control)  # the local target's cgroup; elsewhere none
    sampler = UsageSampler(training.recorder.record, gpus, group, ctx.logger.warning)
    started = time.monotonic()
    queued_at = _queue_watch(ctx.control)
    try:
        with sampler:
            yield sampler
    finally:  # the record's model and its words are imported here, off the script's start path
        from runner.history.usage import account, prices_of
        from runner.telemetry.usage_report import brief

        training.usage = account(
            _running_seconds(started, ctx.control, queued_at),
            len(plan.tasks),
            gpu_processes,
            prices_of(prices),
            cpu_seconds_used=sampler.cpu_seconds,
            peak_rss_bytes=sampler.memory.peaks,
            gpus=sampler.gpu_stats(),
            allocation=ctx.control.allocation,
        )
        ctx.logger.info(f"usage: {brief(training.usage)}")


def _queue_watch(control) -> list[float]:
    """When the plan first waited in a scheduler's queue (Slurm's PENDING), filled in by the target's
    `control.queued` calls: that wait is no usage."""
    queued_at: list[float] = []
    previous = control.queued

    def queued(reason: str) -> None:
        if not queued_at:
            queued_at.append(time.monotonic())
        if previous is not None:
            previous(reason)

    control.queued = queued
    return queued_at


def _running_seconds(started: float, control, queued_at: list[float]) -> float:
    """Wall seconds of the allocation: the scheduler's own figure where the target has one
    (control.allocated_seconds: how long the job ran, not how long tftrain waited for its answers);
    else from when the plan left the queue (control.start_clock) when it waited in one, none when it
    never left it; else from the start of Running."""
    if control.allocated_seconds is not None:
        return control.allocated_seconds
    since = control.running_since
    if queued_at:
        if since is None or since < queued_at[0]:
            return 0.0
        return time.monotonic() - since
    return time.monotonic() - started
