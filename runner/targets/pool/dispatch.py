"""Before a pool job prepares: check the hosts, wait for capacity, hold the leases.

The run stays Queued while it waits; the log says why and where it stands in the queue.
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from runner.errors import HostError, PlacementError, TrainingCanceled
from runner.manifest import LoadedManifest
from runner.plan.model import HostMap
from runner.targets.base import TargetState
from runner.targets.containerized import ImageState
from runner.targets.pool.inventory import Host, LoadedPool
from runner.targets.pool.jobs import capacities, describe, host_map
from runner.targets.pool.leases import Heartbeat, Leases
from runner.targets.pool.preflight import preflight
from runner.targets.pool.schedule import Capacity, Placement, Request, eligible, never_fits, place
from runner.targets.pool.ssh import DockerEndpoint
from runner.telemetry.logger import Logger

QUEUE_POLL_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class PoolJob(ImageState):
    """What `check` found: the base image (as for docker), the pool, and the job's demands."""

    pool: LoadedPool
    request: Request


@dataclass(frozen=True, slots=True)
class PoolSession(TargetState):
    """What `reserve` makes of a PoolJob: the placed job, its hosts and docker connections
    (opened as needed, closed when the job ends), for the steps after it."""

    job: PoolJob
    placement: Placement
    hostmap: HostMap
    endpoints: dict[str, DockerEndpoint] = field(default_factory=dict)

    def hosts(self) -> list[Host]:
        names = dict.fromkeys(item.host for item in self.placement.assignments)
        return [self.job.pool.pool.host(name) for name in names]

    def client(self, host_name: str):
        if host_name not in self.endpoints:
            endpoint = DockerEndpoint(self.job.pool.pool.host(host_name), self.job.pool.state_dir)
            endpoint.connect()
            self.endpoints[host_name] = endpoint
        return self.endpoints[host_name].client

    def close(self) -> None:
        for endpoint in self.endpoints.values():
            endpoint.close()
        self.endpoints.clear()


@contextmanager
def reserve(loaded: LoadedManifest, job: PoolJob, run_id: str, control, logger: Logger):
    manifest = loaded.manifest
    healthy = _healthy_hosts(job, manifest, logger)
    leases = Leases(job.pool.state_dir, job.pool.pool.lease_ttl_seconds)
    key = f"{run_id}@{socket.gethostname()}:{os.getpid()}"
    try:
        with Heartbeat(leases, key):
            placement = _wait_for_capacity(
                leases, key, job.request, healthy, manifest.compute.queue_timeout_seconds, control, logger
            )
            logger.info(f"placed on the pool: {describe(placement)}")
            session = PoolSession(job, placement, host_map(placement, job.pool.pool, manifest))
            try:
                yield session
            finally:
                session.close()
    finally:
        leases.release(key)
        leases.close()


def _healthy_hosts(job: PoolJob, manifest, logger: Logger) -> list[Capacity]:
    allowed = eligible(job.request, capacities(job.pool.pool))
    problems = {}
    for status, problem in preflight([job.pool.pool.host(c.name) for c in allowed], job.pool.state_dir, manifest):
        if problem:
            problems[status.host.name] = problem
            logger.warning(f"left out of this job: {problem}")
    healthy = [c for c in allowed if c.name not in problems]
    reason = never_fits(job.request, healthy) if healthy else "no host is usable"
    if reason:
        raise HostError(f"the pool cannot run this job: {reason}; " + "; ".join(problems.values()))
    return healthy


def _wait_for_capacity(
    leases: Leases, key: str, request: Request, hosts, timeout: int, control, logger: Logger
) -> Placement:
    started = time.monotonic()
    said = None
    while True:
        attempt = leases.try_place(key, hosts, lambda held: place(request, held))
        if attempt.placement.placed:
            return attempt.placement
        waited = time.monotonic() - started
        if waited >= timeout:
            raise PlacementError(
                f"compute.queue_timeout_seconds ({timeout}s) passed and the pool still has no room:"
                f" {attempt.placement.reason}"
            )
        news = (attempt.position, attempt.placement.reason)
        if news != said:
            logger.info(f"queued (position {attempt.position} in the pool's queue): {attempt.placement.reason}")
            said = news
        if control.cancel.wait(QUEUE_POLL_SECONDS):
            raise TrainingCanceled("canceled while queued for the pool's capacity")
