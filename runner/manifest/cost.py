"""What compute costs: `compute.cost: {gpu_hour, cpu_hour, currency}` in the manifest, or `cost:` in
the pool file (any target may hand prices to the run: runner.targets.base.Target.prices). A run's
cost is its allocated GPU-hours and CPU-hours at these prices (runner.history.usage); with
`from: slurm`, the job's billing units in Slurm's accounting (the cluster's TRESBillingWeights)
times its hours, at `billing_hour` each."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from runner.manifest.fields import Model

MAX_PRICE = 1_000_000.0  # per hour: past this a price is a typo (cents written as millicents), not a machine


class CostSpec(Model):
    gpu_hour: float = Field(
        default=0.0,
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
        description="Price of one GPU for one hour (allocated, not used)",
    )
    cpu_hour: float = Field(
        default=0.0,
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
        description="Price of one training process's CPU for one hour",
    )
    currency: str = Field(
        default="USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code the prices are in (shown beside the cost)"
    )


class CostSource(str, Enum):
    """Where a run's cost comes from: the manifest's prices, or the scheduler's own billing."""

    PRICES = "prices"
    SCHEDULER = "slurm"  # the job's billing units in the scheduler's accounting (a catalog row's `bills`)


class ComputeCostSpec(CostSpec):
    """compute.cost: the prices, or Slurm's billing (a pool file's `cost:` has prices only)."""

    source: CostSource = Field(
        default=CostSource.PRICES,
        alias="from",
        strict=False,  # the YAML's string names the member
        description=(
            "prices: gpu_hour and cpu_hour; slurm: the job's billing units from Slurm's accounting (sacct's"
            " AllocTRES billing, the cluster's TRESBillingWeights) × its hours × billing_hour"
        ),
    )
    billing_hour: float = Field(
        default=1.0,
        ge=0,
        le=MAX_PRICE,
        allow_inf_nan=False,
        description=(
            "from: slurm: the price of one billing unit for one hour (1.0: the cost in billing-unit-hours, the"
            " service units a cluster charges)"
        ),
    )
