"""compute.cost against the rest of the manifest (runner.manifest.rules runs it)."""

from __future__ import annotations

from runner.manifest.cost import CostSource
from runner.manifest.document import Location
from runner.manifest.model import Manifest, effective_target
from runner.shared import catalog


def check_cost(manifest: Manifest) -> list[tuple[Location, str]]:
    """compute.cost.from: slurm only where the target's scheduler bills its jobs, and without prices."""
    cost = manifest.compute.cost
    if cost is None or cost.source != CostSource.SCHEDULER:
        return []
    where = ("compute", "cost", "from")
    row = catalog.row_of(effective_target(manifest))
    if row is None or not row.bills:
        billed = ", ".join(name for name in catalog.names() if getattr(catalog.row_of(name), "bills", False))
        return [
            (
                where,
                f"{cost.source.value}: only a target whose scheduler bills its jobs has billing units to price"
                f" (compute.target: {billed}); give gpu_hour and cpu_hour instead",
            )
        ]
    if cost.gpu_hour or cost.cpu_hour:
        return [(where, f"{cost.source.value} prices the job by its billing units: drop gpu_hour and cpu_hour")]
    return []
