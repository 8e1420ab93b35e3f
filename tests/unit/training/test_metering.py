"""The run's usage as the pipeline measures it around Running: allocation from the plan, prices from
compute.cost or the target, GPUs through a fake pynvml (this machine has none), left on the Training."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest
from fake_nvml import fake_nvml

from runner.manifest.cost import CostSpec
from runner.plan.model import LaunchPlan, Role, TaskSpec
from runner.settings import LoggerSettings
from runner.telemetry.logger import Logger
from runner.training.metering import metering


def task(role: Role, rank: int) -> TaskSpec:
    return TaskSpec(role, rank, rank, "localhost", ("python", "train.py"), {}, "/tmp")


class Target:
    name = "docker"

    def __init__(self, prices=None) -> None:
        self.given = prices

    def prices(self, state):
        return self.given

    def process_group(self, control):
        return None  # the docker target's processes are in its containers

    def allocated_gpus(self, state):
        return None  # one per GPU-role process


def context(use_gpu: bool, cost=None, target=None, tasks=None, where="docker"):
    manifest = SimpleNamespace(use_gpu=use_gpu, compute=SimpleNamespace(cost=cost))
    plan = LaunchPlan("tfconfig", where, tuple(tasks or [task(Role.MAIN, 0)]))
    stream = io.StringIO()
    ctx = SimpleNamespace(
        manifest=manifest,
        target=target or Target(),
        checked=None,
        settings=SimpleNamespace(cuda_visible_devices=None),
        control=SimpleNamespace(cgroup=None, queued=None, running_since=None, allocated_seconds=None, allocation=None),
        logger=Logger(stream, settings=LoggerSettings()),
    )
    points = []
    training = SimpleNamespace(
        prepared=SimpleNamespace(plan=plan), recorder=SimpleNamespace(record=points.extend), usage=None
    )
    return ctx, training, points, stream


def test_a_gpu_run_records_its_gpus_as_metrics_and_in_its_usage(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    tasks = [task(Role.CHIEF, 0), task(Role.WORKER, 1), task(Role.WORKER, 2), task(Role.PS, 3)]
    ctx, training, points, stream = context(True, CostSpec(gpu_hour=3600.0, cpu_hour=0.0), tasks=tasks)
    with metering(ctx, training) as sampler:
        sampler.done.wait(0.2)  # shorter than FIRST_GPU_SECONDS: one reading as it ends
    usage = training.usage
    # workers hold a GPU; chief and ps none (runner.plan.layout.GPU_ROLES)
    assert usage.processes == 4 and usage.gpu_processes == 2
    assert usage.gpu_seconds == pytest.approx(2 * usage.wall_seconds, abs=0.01)
    assert usage.cost == pytest.approx(usage.gpu_seconds, rel=0.01)  # 3600 per GPU-hour: one per GPU-second
    assert [gpu.index for gpu in usage.gpus] == [0, 1] and usage.gpus[0].utilization_mean == 90.0
    assert {p.name for p in points} >= {"system/gpu0/utilization", "system/gpu0/memory_used", "system/gpu1/utilization"}
    ctx.logger.flush()
    assert "usage: 0 GPU-hours" not in stream.getvalue() and "GPU-hours, " in stream.getvalue()


def test_a_cpu_run_or_a_remote_target_samples_no_gpu(monkeypatch):
    nvml = monkeypatch.setitem(sys.modules, "pynvml", fake_nvml()) or sys.modules["pynvml"]
    for use_gpu, where in ((False, "docker"), (True, "kubernetes")):  # the cluster's GPUs are not this machine's
        ctx, training, points, _ = context(use_gpu, where=where)
        with metering(ctx, training):
            pass
        assert training.usage.gpus is None and points == []
    assert nvml.calls["init"] == 0


def test_the_target_prices_when_the_manifest_has_none():
    ctx, training, _, _ = context(False, target=Target(CostSpec(cpu_hour=7.0, currency="EUR")))
    with metering(ctx, training):
        pass
    assert training.usage.prices.currency == "EUR" and training.usage.cost is not None
    ctx, training, _, _ = context(False, cost=CostSpec(cpu_hour=1.0), target=Target(CostSpec(cpu_hour=7.0)))
    with metering(ctx, training):
        pass
    assert training.usage.prices.cpu_hour == 1.0  # the manifest's compute.cost comes first


def test_usage_is_left_however_running_ends():
    ctx, training, _, _ = context(False)
    with pytest.raises(RuntimeError), metering(ctx, training):
        raise RuntimeError("the target failed")
    assert training.usage is not None and training.usage.processes == 1


def test_a_wait_in_a_schedulers_queue_is_no_usage():
    """A Slurm job PENDING for a while, then running: its wall seconds count from when it left the
    queue (control.start_clock), not from when Running began."""
    import time

    from runner.targets.base import RunControl

    ctx, training, _, _ = context(False, CostSpec(cpu_hour=3600.0, gpu_hour=0.0))
    ctx.control = RunControl(marker="", grace_seconds=1)
    said = []
    ctx.control.queued = said.append  # the session's own handler: still called
    begun = time.monotonic()
    with metering(ctx, training):
        ctx.control.queued("Priority")
        time.sleep(0.4)
        ctx.control.start_clock()
    ended = time.monotonic()
    assert said == ["Priority"]
    assert 0 <= training.usage.wall_seconds <= ended - ctx.control.running_since
    assert training.usage.wall_seconds <= (ended - begun) - 0.4


def test_a_plan_that_never_left_the_queue_used_nothing():
    from runner.targets.base import RunControl

    ctx, training, _, _ = context(False, CostSpec(cpu_hour=3600.0, gpu_hour=0.0))
    ctx.control = RunControl(marker="", grace_seconds=1)
    ctx.control.start_clock()  # the pipeline's, before the target submits
    with metering(ctx, training):
        ctx.control.queued("Resources")  # canceled while pending
    assert training.usage.wall_seconds == 0.0 and training.usage.cost == 0.0


class SlurmLike(Target):
    name = "slurm"

    def allocated_gpus(self, state):
        return 6  # its sbatch request: --gpus-per-socket=3 --sockets-per-node=2 (extra_args), one node


def test_a_schedulers_own_figures_are_the_usage():
    """A Slurm job: the GPUs its request holds (not one per GPU role), for the seconds Slurm says it
    ran (control.allocated_seconds), not for how long tftrain waited on a hung scontrol."""
    import time

    from runner.targets.base import RunControl

    ctx, training, _, _ = context(False, CostSpec(cpu_hour=3600.0, gpu_hour=3600.0), target=SlurmLike())
    ctx.control = RunControl(marker="", grace_seconds=1)
    with metering(ctx, training):
        time.sleep(0.3)  # tftrain waiting
        ctx.control.allocated_seconds = 0.1
    usage = training.usage
    assert usage.wall_seconds == 0.1 and usage.gpu_processes == 6 and usage.gpu_seconds == 0.6
    assert usage.cost == 0.1 + 0.6
