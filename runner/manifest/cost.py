"""What compute costs: `compute.cost: {gpu_hour, cpu_hour, currency}` in the manifest, or `cost:` in
the pool file (any target may hand prices to the run: runner.targets.base.Target.prices). A run's
cost is its allocated GPU-hours and CPU-hours at these prices (runner.history.usage)."""

from __future__ import annotations

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
