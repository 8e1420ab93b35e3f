"""What a run used and what it cost: run.json's `usage`.

Allocated, not used: a run holds its processes' CPUs and GPUs for as long as it trains whether it
keeps them busy or not, which is what a cloud or a cluster bills. Each training process counts as
one CPU; with use_gpu each process of a GPU role (runner.plan.layout.GPU_ROLES) as one
GPU. CPU-seconds = processes × wall, GPU-seconds = GPU processes × wall, the wall being how long
Running took in this attempt (each attempt of `retry:` is a run of its own, with its own usage).
What was measured beside it: the CPU time the run's processes used (the local target's cgroup),
the peak resident memory of each rank (local target), each GPU's time-averaged utilisation and
peak memory (NVML, on the targets that train on this machine; none without a GPU, never an error).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SECONDS_PER_HOUR = 3600.0


class _Model(BaseModel):
    # as run.json's other parts: keys a newer tftrain wrote are kept; built on first use
    model_config = ConfigDict(extra="allow", defer_build=True)


class GpuStats(_Model):
    """One GPU as NVML saw it while the run trained."""

    index: int
    name: str | None = None
    utilization_mean: float  # percent of the time a kernel ran, averaged over the samples
    memory_peak_bytes: int
    memory_total_bytes: int | None = None
    samples: int


class Prices(_Model):
    """The prices the cost was worked out at (from compute.cost or the target's)."""

    gpu_hour: float
    cpu_hour: float
    currency: str = "USD"
    billing_hour: float | None = None  # compute.cost.from: slurm: per billing unit-hour (the allocation's billing)


# a release's usage.json is another party's file: no -1, no Infinity
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class Allocation(_Model):
    """What the scheduler holds for the job, and who said it: `source` is "sacct" (Slurm's accounting),
    "scontrol" (the controller, or the jobcomp file once it forgot the job) or "tftrain" (its own clock)."""

    source: str
    job_id: str | None = None
    state: str | None = None  # the job's final state, as accounting recorded it
    exit_code: str | None = None  # N:S
    elapsed_seconds: Amount | None = None
    cpus: Count | None = None
    mem_bytes: Count | None = None
    gpus: Count | None = None
    billing: Count | None = None  # Slurm's billing units (AllocTRES billing: the cluster's TRESBillingWeights)
    starts: Count | None = None  # a requeued job's starts: elapsed_seconds is all of theirs
    # sacct's record set against the run's own view (runner.targets.slurm.crosscheck): each disagreement's warning;
    # [] where all agreed, None where none was made (no sacct record, an older tftrain's record)
    disagreements: list[str] | None = None

    def agreement(self) -> str | None:
        """The cross-check in a few words (the console's usage line, the summary's usage table); None: none was made."""
        found = self.disagreements
        if found is None:
            return None
        if not found:
            return "agrees with tftrain's view"
        return f"{len(found)} disagreement{'s' if len(found) != 1 else ''} with tftrain's view: " + "; ".join(
            " ".join(line.split())[:300]
            for line in found  # a release's usage.json is another party's: one line each
        )


class Usage(_Model):
    wall_seconds: Amount
    processes: Count
    gpu_processes: Count = 0
    cpu_seconds: Amount  # allocated: processes × wall
    gpu_seconds: Amount = 0.0  # allocated: GPU processes × wall
    cpu_seconds_used: Amount | None = None  # measured: the run's cgroup (local target), at the last sample
    peak_rss_bytes: dict[str, int] = Field(default_factory=dict)  # rank → its largest process's peak resident set
    gpus: list[GpuStats] | None = None  # None: no GPU was sampled (none here, no NVML, a remote target)
    prices: Prices | None = None
    cost: Amount | None = None
    allocation: Allocation | None = None  # a scheduler's account of the job (Slurm), where the target has one

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / SECONDS_PER_HOUR

    @property
    def cpu_hours(self) -> float:
        return self.cpu_seconds / SECONDS_PER_HOUR

    def as_dict(self) -> dict:
        """run.json's form: what was not measured is left out, not written as null."""
        return self.model_dump(mode="json", exclude_none=True)


def prices_of(spec) -> Prices | None:
    """A runner.manifest.cost.CostSpec (or None) as the prices a record keeps."""
    if spec is None:
        return None
    from runner.manifest.cost import CostSource

    billing = spec.billing_hour if getattr(spec, "source", CostSource.PRICES) == CostSource.SCHEDULER else None
    return Prices(gpu_hour=spec.gpu_hour, cpu_hour=spec.cpu_hour, currency=spec.currency, billing_hour=billing)


def cost_of(
    gpu_seconds: float, cpu_seconds: float, prices: Prices | None, allocation: Allocation | None = None
) -> float | None:
    """At prices.billing_hour (compute.cost.from: slurm): the allocation's billing units × its hours;
    None when accounting gave no billing. Else GPU-hours and CPU-hours at their prices."""
    if prices is None:
        return None
    if prices.billing_hour is not None:
        if allocation is None or allocation.billing is None or allocation.elapsed_seconds is None:
            return None
        return allocation.billing * allocation.elapsed_seconds / SECONDS_PER_HOUR * prices.billing_hour
    return gpu_seconds / SECONDS_PER_HOUR * prices.gpu_hour + cpu_seconds / SECONDS_PER_HOUR * prices.cpu_hour


def account(
    wall_seconds: float,
    processes: int,
    gpu_processes: int,
    prices: Prices | None = None,
    *,
    cpu_seconds_used: float | None = None,
    peak_rss_bytes: dict[str, int] | None = None,
    gpus: list[GpuStats] | None = None,
    allocation: Allocation | None = None,
) -> Usage:
    """The usage of one attempt that trained `wall_seconds` with `processes` processes, `gpu_processes`
    of them holding a GPU each; its cost at `prices`, when there are prices."""
    wall = round(max(0.0, float(wall_seconds)), 3)  # what the record says is what the cost is of
    cpu, gpu = round(processes * wall, 3), round(gpu_processes * wall, 3)
    return Usage(
        wall_seconds=wall,
        processes=processes,
        gpu_processes=gpu_processes,
        cpu_seconds=cpu,
        gpu_seconds=gpu,
        cpu_seconds_used=None if cpu_seconds_used is None else round(cpu_seconds_used, 3),
        peak_rss_bytes=dict(peak_rss_bytes or {}),
        gpus=gpus or None,
        prices=prices,
        cost=cost_of(gpu, cpu, prices, allocation),
        allocation=allocation,
    )


def usage_of(record: dict) -> Usage | None:
    """A run record's usage (run.json's `usage`), or None when it has none (an older tftrain's)."""
    return usage_from(record.get("usage") if isinstance(record, dict) else None)


def usage_from(data) -> Usage | None:
    """Usage from its JSON object (run.json's `usage`, a release's usage.json), or None when it is
    not one: a file another party can write is read as hostile, and a wrong one is no usage."""
    if not isinstance(data, dict):
        return None
    try:
        return Usage.model_validate(data)
    except ValueError:
        return None
