"""tftrain pool status | check | schema: the runner pool's hosts, as tftrain sees them."""

from __future__ import annotations

import json
from pathlib import Path

from runner.errors import HostError
from runner.manifest import load_manifest
from runner.targets.pool.inventory import DEFAULT_POOL_FILE, LoadedPool, load_pool, pool_schema
from runner.targets.pool.jobs import capacities, request_for
from runner.targets.pool.leases import Leases
from runner.targets.pool.preflight import HostStatus, preflight
from runner.targets.pool.schedule import eligible


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="pool_command", required=True)
    for name, text in (("status", "every host: ssh, docker, NVIDIA runtime, driver, GPUs free, jobs"),
                       ("check", "preflight: fail naming the first host that cannot run (the manifest's) jobs")):
        command = sub.add_parser(name, help=text)
        command.add_argument("--pool", help=f"the pool file (default: the manifest's compute.pool_file, else {DEFAULT_POOL_FILE})")
        command.add_argument("-f", "--file", help="a manifest: only its eligible hosts, checked for its needs (GPU, driver)")
        command.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("schema", help="print the pool file's JSON Schema")


def run(args, logger) -> int:
    if args.pool_command == "schema":
        logger.text(pool_schema().rstrip("\n"))
        return 0
    manifest = load_manifest(args.file).manifest if args.file else None
    pool = load_pool(_pool_path(args, manifest))
    hosts = pool.pool.hosts
    if manifest is not None:
        allowed = {c.name for c in eligible(request_for(manifest), capacities(pool.pool))}
        hosts = [host for host in hosts if host.name in allowed]
    checked = preflight(hosts, pool.state_dir, manifest)
    problems = [problem for _, problem in checked if problem]
    held = _held(pool)
    if args.json:
        logger.text(json.dumps([_as_dict(status, held, problem) for status, problem in checked], indent=2))
    else:
        logger.table(f"pool {pool.path}", ["host", "address", "ssh", "docker", "nvidia", "driver", "GPUs free", "slots free", "jobs"],
                     [_row(status, held) for status, _ in checked])
    if args.pool_command == "check":
        if problems:
            more = f" (and {len(problems) - 1} more host{'s' * (len(problems) > 2)})" if len(problems) > 1 else ""
            raise HostError(problems[0] + more)
        logger.info(f"pool check: {len(checked)} host{'s' * (len(checked) != 1)} ready")
    return 0


def _pool_path(args, manifest) -> Path:
    if args.pool:
        return Path(args.pool)
    if manifest is not None:
        return Path(args.file).resolve().parent / manifest.compute.pool_file
    return Path(DEFAULT_POOL_FILE)


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
