"""Where a sweep's concurrent trials run on this machine (the local and docker targets): checked
before any trial runs (slots and GPUs are hard limits, CPUs a warning), and the GPUs split between
them, so that two trials never share one. Pool leases, Slurm's GRES and Kubernetes place the trials
of the other targets themselves."""

from __future__ import annotations

from collections.abc import Callable

from runner.errors import UnsupportedError
from runner.manifest import effective_target
from runner.manifest.model import Manifest
from runner.manifest.rules import process_count
from runner.plan.launchers.capacity import cpu_count, gpu_count, named_gpus
from runner.targets.catalog import ON_THIS_MACHINE
from runner.telemetry.logger import Logger


def check_concurrency(
    manifest: Manifest, logger: Logger, cuda_visible_devices: str | None, count: Callable[[str | None], int | None] = gpu_count
) -> list[str]:
    """What this machine can place, before any trial runs: slots_per_node and GPUs are hard limits,
    CPUs a warning (the trials share them). Pool leases and the cluster queue what does not fit.
    Returns the GPUs the trials may use, as CUDA_VISIBLE_DEVICES names them (its own, else every one
    nvidia-smi lists: asked once), for gpu_shares; [] where none are split: no use_gpu, a target that
    places its own trials, GPUs unknown."""
    if effective_target(manifest) not in ON_THIS_MACHINE:
        return []
    limit = manifest.sweep.limits.max_concurrent_trials
    per = process_count(manifest)
    wanted = per * limit
    where = f"sweep.limits.max_concurrent_trials: {limit} trials of {per} process{'es' if per > 1 else ''}"
    slots = manifest.compute.slots_per_node
    if slots and wanted > slots:
        raise UnsupportedError(f"{where} need {wanted} slots; compute.slots_per_node is {slots}")
    gpus = count(cuda_visible_devices) if manifest.use_gpu else None
    if gpus is not None and wanted > gpus:
        raise UnsupportedError(f"{where} need {wanted} GPUs; this machine has {gpus}")
    if wanted > cpu_count():
        logger.warning(f"{where} on this machine's {cpu_count()} CPUs: they will share them")
    return usable_gpus(cuda_visible_devices, gpus)


def gpu_shares(gpus: list[str], concurrent: int) -> list[str | None]:
    """Each concurrent trial's GPUs, as CUDA_VISIBLE_DEVICES lists them: `gpus` (check_concurrency's)
    split into `concurrent` equal shares, the rest left idle. None for every trial where they are not
    split: one trial at a time has them all, as a run has; no GPUs to split."""
    each = len(gpus) // concurrent if concurrent > 1 else 0
    if each == 0:
        return [None] * concurrent
    return [",".join(gpus[share * each:(share + 1) * each]) for share in range(concurrent)]


def usable_gpus(cuda_visible_devices: str | None, found: int | None) -> list[str]:
    """The GPUs a process of tftrain's may use, as CUDA_VISIBLE_DEVICES names them, at most `found`
    (what nvidia-smi lists); without the variable, 0 … found-1."""
    if found is None:
        return []
    named = named_gpus(cuda_visible_devices)
    return [str(index) for index in range(found)] if named is None else named[:found]
