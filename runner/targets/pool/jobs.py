"""A manifest as the pool's scheduler sees it: demands in, a host map for the launchers out."""

from __future__ import annotations

from runner.manifest.model import Manifest, MpiTraining
from runner.plan.layout import task_layout
from runner.plan.model import DEFAULT_SSH_PORT, HostMap
from runner.targets.pool.inventory import Pool
from runner.targets.pool.schedule import Capacity, Demand, Placement, Request


def request_for(manifest: Manifest) -> Request:
    """One demand per slot of the job's layout (runner.plan.layout): an MPI node asks for its ranks
    together, every other task for one GPU when its role computes on one, else one CPU slot."""
    demands: dict[str, Demand] = {}
    for slot in task_layout(manifest):
        held = demands.get(slot.key)
        gpus, cpus = (held.gpus, held.cpus) if held else (0, 0)
        demands[slot.key] = Demand(slot.key, gpus=gpus + slot.gpus, cpus=cpus + (0 if slot.gpus else 1))
    compute = manifest.compute
    return Request(
        demands=tuple(demands.values()),
        distinct_hosts=isinstance(manifest.distributed_training, MpiTraining),
        hosts=frozenset(compute.hosts),
        labels=frozenset(compute.host_labels),
        gpu_type=compute.gpu_type,
    )


def capacities(pool: Pool) -> list[Capacity]:
    return [Capacity(h.name, h.gpus, h.cpu_slots, frozenset(h.labels), h.gpu_type) for h in pool.hosts]


def host_map(placement: Placement, pool: Pool, manifest: Manifest) -> HostMap:
    hosts = {item.key: (item.host, pool.host(item.host).address) for item in placement.assignments}
    training = manifest.distributed_training
    ssh_port = (
        getattr(training, "ssh_port", None) or DEFAULT_SSH_PORT
    )  # (a slotted class has no field defaults as attributes)
    return HostMap(hosts, ssh_port=ssh_port)


def describe(placement: Placement) -> str:
    parts = []
    for item in placement.assignments:
        what = (
            f"GPUs {','.join(map(str, item.gpu_ids))}"
            if item.gpu_ids
            else f"{item.cpus} CPU slot{'s' * (item.cpus != 1)}"
        )
        parts.append(f"{item.key} → {item.host} ({what})")
    return "; ".join(parts)
