"""`tftrain pool status | check | schema`: the pool's hosts as tftrain sees them (ssh, docker, NVIDIA
runtime, driver, GPUs and slots free, jobs), as plain rows. runner/cli/pool.py reaches it through
runner.targets.factory.target_command("pool") and prints what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.targets.pool.inventory import DEFAULT_POOL_FILE, LoadedPool, load_pool, pool_schema
from runner.targets.pool.jobs import capacities, request_for
from runner.targets.pool.leases import Leases
from runner.targets.pool.preflight import HostStatus, preflight
from runner.targets.pool.schedule import eligible

if TYPE_CHECKING:
    from runner.manifest.model import Manifest

__all__ = ["COLUMNS", "DEFAULT_POOL_FILE", "Survey", "pool_schema", "survey"]

COLUMNS = ["host", "address", "ssh", "docker", "nvidia", "driver", "GPUs free", "slots free", "jobs"]


@dataclass(frozen=True, slots=True)
class Survey:
    """Each host checked: a table row, a JSON entry, and what stops it (None: ready)."""

    path: Path  # the pool file
    rows: list[list[str]]
    entries: list[dict]
    problems: list[str]  # the hosts that cannot run, first first


def survey(path: Path, manifest: Manifest | None) -> Survey:
    """The hosts of the pool file at `path` (only those eligible for `manifest`'s jobs, checked for
    its needs, when one is given)."""
    pool = load_pool(path)
    hosts = pool.pool.hosts
    if manifest is not None:
        allowed = {c.name for c in eligible(request_for(manifest), capacities(pool.pool))}
        hosts = [host for host in hosts if host.name in allowed]
    checked = preflight(hosts, pool.state_dir, manifest)
    held = _held(pool)
    return Survey(
        pool.path,
        [_row(status, held) for status, _ in checked],
        [_as_dict(status, held, problem) for status, problem in checked],
        [problem for _, problem in checked if problem],
    )


def _held(pool: LoadedPool) -> dict[str, list]:
    leases = Leases(pool.state_dir, pool.pool.lease_ttl_seconds)
    try:
        return leases.holders()
    finally:
        leases.close()


def _free(status: HostStatus, held: dict[str, list]) -> tuple[int, int, set[str]]:
    rows = held.get(status.host.name, [])
    gpus = status.host.gpus - sum(1 for _, gpu, _ in rows if gpu is not None)
    slots = status.host.cpu_slots - sum(cpus for _, _, cpus in rows)
    jobs = {job.split("@")[0] for job, _, _ in rows} | set(status.containers)
    return gpus, slots, jobs


def _row(status: HostStatus, held: dict[str, list]) -> list[str]:
    gpus, slots, jobs = _free(status, held)
    return [
        status.host.name,
        status.host.address,
        "ok" if not status.ssh else f"no: {status.ssh}",
        "-" if status.ssh else (status.docker_version or f"no: {status.docker}"),
        "yes" if status.nvidia_runtime else "no",
        status.driver or "-",
        f"{gpus}/{status.host.gpus}" + (f" {status.host.gpu_type}" if status.host.gpu_type else ""),
        f"{slots}/{status.host.cpu_slots}",
        ", ".join(sorted(jobs)) or "-",
    ]


def _as_dict(status: HostStatus, held: dict[str, list], problem: str | None) -> dict:
    gpus, slots, jobs = _free(status, held)
    return {
        "host": status.host.name,
        "address": status.host.address,
        "ssh": status.ssh or "ok",
        "docker": status.docker or status.docker_version,
        "nvidia_runtime": status.nvidia_runtime,
        "driver": status.driver,
        "gpus": {"total": status.host.gpus, "free": gpus, "type": status.host.gpu_type, "seen": list(status.gpus_seen)},
        "cpu_slots": {"total": status.host.cpu_slots, "free": slots},
        "jobs": sorted(jobs),
        "problem": problem,
    }
