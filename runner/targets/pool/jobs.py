"""A manifest as the pool's scheduler sees it: demands in, a host map for the launchers out."""

from __future__ import annotations

from runner.manifest.model import Manifest, MpiTraining, MultiWorkerMirroredTraining, ParameterServerTraining
from runner.plan.model import DEFAULT_SSH_PORT, HostMap
from runner.targets.pool.inventory import Pool
from runner.targets.pool.schedule import Capacity, Demand, Placement, Request


def request_for(manifest: Manifest) -> Request:
    training = manifest.distributed_training
    gpu = manifest.use_gpu
    if isinstance(training, MpiTraining):
        per_node = training.process_count_per_node
        demands = [_demand(f"node {i}", per_node, gpu) for i in range(manifest.node_count)]
    elif isinstance(training, ParameterServerTraining):
        demands = [_demand("chief 0", 1, gpu)] if training.chief else []
        demands += [_demand(f"worker {i}", 1, gpu) for i in range(training.worker_count)]
        demands += [Demand(f"ps {i}", cpus=1) for i in range(training.parameter_server_count)]
        if training.evaluator:
            demands.append(_demand("evaluator 0", 1, gpu))
    elif isinstance(training, MultiWorkerMirroredTraining):
        demands = [_demand(f"worker {i}", 1, gpu) for i in range(training.worker_count)]
    else:
        demands = [_demand("main 0", 1, gpu)]
    compute = manifest.compute
    return Request(
        demands=tuple(demands),
        distinct_hosts=isinstance(training, MpiTraining),
        hosts=frozenset(compute.hosts),
        labels=frozenset(compute.host_labels),
        gpu_type=compute.gpu_type,
    )


def _demand(key: str, count: int, gpu: bool) -> Demand:
    """`count` processes: one GPU each, or one CPU slot each."""
    return Demand(key, gpus=count) if gpu else Demand(key, cpus=count)


def capacities(pool: Pool) -> list[Capacity]:
    return [Capacity(h.name, h.gpus, h.cpu_slots, frozenset(h.labels), h.gpu_type) for h in pool.hosts]


def host_map(placement: Placement, pool: Pool, manifest: Manifest) -> HostMap:
    hosts = {item.key: (item.host, pool.host(item.host).address) for item in placement.assignments}
    training = manifest.distributed_training
    ssh_port = getattr(training, "ssh_port", None) or DEFAULT_SSH_PORT  # (a slotted class has no field defaults as attributes)
    return HostMap(hosts, ssh_port=ssh_port)


def describe(placement: Placement) -> str:
    parts = []
    for item in placement.assignments:
        what = f"GPUs {','.join(map(str, item.gpu_ids))}" if item.gpu_ids else f"{item.cpus} CPU slot{'s' * (item.cpus != 1)}"
        parts.append(f"{item.key} → {item.host} ({what})")
    return "; ".join(parts)
