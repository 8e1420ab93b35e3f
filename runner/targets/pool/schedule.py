"""Placement: which host runs which of a job's tasks, and which GPUs they get. Pure and fast:
no I/O, only the pool's free capacity in, assignments (or the reason there are none) out.

Rules: a demand is what must share one host (an MPI node's ranks, one TF_CONFIG task). GPU
demands get whole GPUs, one per rank, best fit (the host left with the fewest free GPUs), so
large holes stay for large jobs. CPU demands (parameter servers, CPU-only jobs) take CPU slots,
preferring hosts without free GPUs. MPI nodes go to distinct hosts. `compute.hosts`,
`compute.host_labels` and `compute.gpu_type` narrow the hosts a job may use.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Capacity:
    """A host as placement sees it: what it has and what running jobs hold."""

    name: str
    gpus: int
    cpu_slots: int
    labels: frozenset[str] = frozenset()
    gpu_type: str | None = None
    used_gpus: frozenset[int] = frozenset()
    used_cpus: int = 0

    @property
    def free_gpus(self) -> int:
        return self.gpus - len(self.used_gpus)

    @property
    def free_cpus(self) -> int:
        return self.cpu_slots - self.used_cpus

    def take(self, gpu_ids: tuple[int, ...], cpus: int) -> Capacity:
        return replace(self, used_gpus=self.used_gpus | frozenset(gpu_ids), used_cpus=self.used_cpus + cpus)


@dataclass(frozen=True)
class Demand:
    key: str  # "node 0", "worker 1", "ps 0"
    gpus: int = 0
    cpus: int = 0


@dataclass(frozen=True)
class Request:
    demands: tuple[Demand, ...]
    distinct_hosts: bool = False  # MPI: one node per host
    hosts: frozenset[str] = frozenset()  # allowed hosts; empty: any
    labels: frozenset[str] = frozenset()
    gpu_type: str | None = None

    @property
    def gpus(self) -> int:
        return sum(demand.gpus for demand in self.demands)


@dataclass(frozen=True)
class Assignment:
    key: str
    host: str
    gpu_ids: tuple[int, ...] = ()
    cpus: int = 0


@dataclass(frozen=True)
class Placement:
    assignments: tuple[Assignment, ...] = ()
    reason: str | None = None  # why not, when there are no assignments

    @property
    def placed(self) -> bool:
        return self.reason is None

    def host_of(self, key: str) -> str:
        return next(item.host for item in self.assignments if item.key == key)


def eligible(request: Request, hosts: list[Capacity]) -> list[Capacity]:
    return [
        host
        for host in hosts
        if (not request.hosts or host.name in request.hosts)
        and request.labels <= host.labels
        and (request.gpu_type is None or host.gpu_type == request.gpu_type)
    ]


def place(request: Request, hosts: list[Capacity]) -> Placement:
    """Assignments for every demand, or the reason it does not fit now."""
    candidates = {host.name: host for host in eligible(request, hosts)}
    if not candidates:
        return Placement(reason=_no_host_reason(request))
    # biggest first: they have the fewest places to go
    order = sorted(request.demands, key=lambda d: (-d.gpus, -d.cpus))
    assignments: dict[str, Assignment] = {}
    used_hosts: set[str] = set()
    for demand in order:
        options = [
            h for h in candidates.values() if _fits(h, demand) and not (request.distinct_hosts and h.name in used_hosts)
        ]
        if not options:
            return Placement(reason=_busy_reason(demand, request, list(candidates.values())))
        host = min(options, key=lambda h: _score(h, demand))
        gpu_ids = tuple(sorted(set(range(host.gpus)) - host.used_gpus))[: demand.gpus]
        candidates[host.name] = host.take(gpu_ids, demand.cpus)
        used_hosts.add(host.name)
        assignments[demand.key] = Assignment(demand.key, host.name, gpu_ids, demand.cpus)
    ordered = tuple(assignments[demand.key] for demand in request.demands)
    return Placement(ordered)


def never_fits(request: Request, hosts: list[Capacity]) -> str | None:
    """Why the job cannot run even on an idle pool (bad input), or None."""
    idle = [replace(host, used_gpus=frozenset(), used_cpus=0) for host in hosts]
    placement = place(request, idle)
    if placement.placed:
        return None
    allowed = eligible(request, idle)
    total = sum(host.gpus for host in allowed)
    if request.distinct_hosts and len(request.demands) > len(allowed):
        return f"its {len(request.demands)} nodes need a host each and {len(allowed)} pool hosts are eligible"
    if request.gpus > total:
        return f"the job needs {request.gpus} GPUs and the pool's eligible hosts have {total}"
    return placement.reason


def _fits(host: Capacity, demand: Demand) -> bool:
    return host.free_gpus >= demand.gpus and host.free_cpus >= demand.cpus


def _score(host: Capacity, demand: Demand) -> tuple:
    if demand.gpus:
        return (host.free_gpus - demand.gpus, -host.free_cpus, host.name)  # best fit
    return (host.free_gpus, -host.free_cpus, host.name)  # CPU work away from free GPUs


def _no_host_reason(request: Request) -> str:
    wanted = []
    if request.hosts:
        wanted.append(f"compute.hosts {sorted(request.hosts)}")
    if request.labels:
        wanted.append(f"compute.host_labels {sorted(request.labels)}")
    if request.gpu_type:
        wanted.append(f"compute.gpu_type {request.gpu_type!r}")
    return "no pool host matches " + (" and ".join(wanted) or "the job")


def _busy_reason(demand: Demand, request: Request, hosts: list[Capacity]) -> str:
    need = f"{demand.gpus} free GPUs" if demand.gpus else f"{demand.cpus} free CPU slots"
    state = ", ".join(
        f"{h.name}: {h.free_gpus}/{h.gpus} GPUs, {h.free_cpus}/{h.cpu_slots} slots free" for h in hosts[:8]
    )
    more = f", … {len(hosts) - 8} more" if len(hosts) > 8 else ""
    spread = " on a host of its own" if request.distinct_hosts else ""
    return f"{demand.key} needs {need}{spread} ({state}{more})"
