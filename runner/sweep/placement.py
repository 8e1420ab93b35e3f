"""Where a sweep's concurrent trials (and an evaluation's seeds) run on this machine (the local and docker targets):
checked
before any trial runs (slots and GPUs are hard limits, CPUs a warning), and the GPUs split between
them, so that two trials never share one. Pool leases, Slurm's GRES and Kubernetes place the trials
of the other targets themselves."""

from __future__ import annotations

from collections.abc import Callable

from runner.errors import UnsupportedError
from runner.manifest import effective_target
from runner.manifest.model import Manifest
from runner.manifest.rules import process_count
from runner.shared.catalog import on_this_machine
from runner.shared.machine import cpu_count, gpu_count, named_gpus
from runner.telemetry.logger import Logger


def check_concurrency(
    manifest: Manifest,
    logger: Logger,
    cuda_visible_devices: str | None,
    count: Callable[[str | None], int | None] = gpu_count,
) -> list[str]:
    """What this machine can place, before any trial runs: slots_per_node and GPUs are hard limits,
    CPUs a warning (the trials share them). Pool leases and the cluster queue what does not fit.
    Returns the GPUs the trials may use, as CUDA_VISIBLE_DEVICES names them (its own, else every one
    nvidia-smi lists: asked once), for gpu_shares; [] where none are split: no use_gpu, a target that
    places its own trials, GPUs unknown."""
    limit = manifest.sweep.limits.max_concurrent_trials
    return check_runs(
        manifest, limit, f"sweep.limits.max_concurrent_trials: {limit} trials", logger, cuda_visible_devices, count
    )


def check_runs(
    manifest: Manifest,
    limit: int,
    where: str,
    logger: Logger,
    cuda_visible_devices: str | None,
    count: Callable[[str | None], int | None] = gpu_count,
) -> list[str]:
    """check_concurrency for `limit` runs of the manifest at once (a sweep's trials, an evaluation's
    seeds); `where` names the setting that asks for them."""
    if not on_this_machine(effective_target(manifest)):
        return []
    per = process_count(manifest)
    wanted = per * limit
    where = f"{where} of {per} process{'es' if per > 1 else ''}"
    slots = manifest.compute.slots_per_node
    if slots and wanted > slots:
        raise UnsupportedError(f"{where} need {wanted} slots; compute.slots_per_node is {slots}")
    gpus = count(cuda_visible_devices) if manifest.use_gpu else None
    if gpus is not None and wanted > gpus:
        raise UnsupportedError(f"{where} need {wanted} GPUs; this machine has {gpus}")
    if wanted > cpu_count():
        logger.warning(f"{where} on this machine's {cpu_count()} CPUs: they will share them")
    return usable_gpus(cuda_visible_devices, gpus)


def runs_that_fit(
    manifest: Manifest,
    wanted: int,
    cuda_visible_devices: str | None,
    count: Callable[[str | None], int | None] = gpu_count,
) -> int:
    """How many of `wanted` runs of the manifest this machine holds at once, at least one: each its
    own GPUs (use_gpu), slots (compute.slots_per_node) and a CPU per process. Other targets: all."""
    if not on_this_machine(effective_target(manifest)):
        return wanted
    per = process_count(manifest)
    fits = [wanted, cpu_count() // per]
    if manifest.compute.slots_per_node:
        fits.append(manifest.compute.slots_per_node // per)
    gpus = count(cuda_visible_devices) if manifest.use_gpu else None
    if gpus is not None:
        fits.append(gpus // per)
    return max(1, min(fits))


def gpu_shares(gpus: list[str], concurrent: int) -> list[str | None]:
    """Each concurrent trial's GPUs, as CUDA_VISIBLE_DEVICES lists them: `gpus` (check_concurrency's)
    split into `concurrent` equal shares, the rest left idle. None for every trial where they are not
    split: one trial at a time has them all, as a run has; no GPUs to split."""
    each = len(gpus) // concurrent if concurrent > 1 else 0
    if each == 0:
        return [None] * concurrent
    return [",".join(gpus[share * each : (share + 1) * each]) for share in range(concurrent)]


def usable_gpus(cuda_visible_devices: str | None, found: int | None) -> list[str]:
    """The GPUs a process of tftrain's may use, as CUDA_VISIBLE_DEVICES names them, at most `found`
    (what nvidia-smi lists); without the variable, 0 … found-1."""
    if found is None:
        return []
    named = named_gpus(cuda_visible_devices)
    return [str(index) for index in range(found)] if named is None else named[:found]
