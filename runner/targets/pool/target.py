"""The pool target: your own GPU machines, listed in the pool file, reached over ssh and docker.

check: the pool file, `compute.hosts`, and whether the job could ever fit. reserve: the hosts'
preflight (`tftrain pool check`), then a place in the queue until leases on GPUs/slots are
taken. environment: the training image, built on every placed host through its own docker
endpoint (the Dockerfile is the docker target's, so the content tag is the same everywhere).
execute: runner.targets.pool.run_on_hosts, with the session the reservation placed (kept on the
target, which serves one run).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from runner.environments import VENV_PYTHON, prepare_image
from runner.errors import ManifestError, PlacementError
from runner.history.rundir import RunPaths, RuntimePaths
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan, NetworkMode
from runner.settings import Settings
from runner.targets.base import Environment, Outcome, RunControl, Target
from runner.targets.containerized import as_it_is, container_view, image_state, planned_environment
from runner.targets.pool import run_on_hosts
from runner.targets.pool.dispatch import PoolJob, PoolSession
from runner.targets.pool.dispatch import reserve as reserve_capacity
from runner.targets.pool.inventory import load_pool
from runner.targets.pool.jobs import capacities, host_map, request_for
from runner.targets.pool.schedule import never_fits, place
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump


def pool_path(loaded: LoadedManifest) -> Path:
    return loaded.base_dir / loaded.manifest.compute.pool_file


class PoolTarget(Target):
    """The docker target's training image and mounts, on hosts the reservation placed the job on.
    The image is on the pool's hosts: the gate uses an environment of its own (Target.probing)."""

    name = "pool"

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings)
        self.session: PoolSession | None = None  # the placed job, between reserve and its end

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> PoolJob:
        base = image_state(loaded)
        pool = load_pool(pool_path(loaded))
        compute = loaded.manifest.compute
        names = [host.name for host in pool.pool.hosts]
        for index, wanted in enumerate(compute.hosts):
            if wanted not in names:
                close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ManifestError(
                    f"{loaded.path}: compute.hosts[{index}]: unknown host {wanted!r}; {hint}{pool.path} has"
                    f" {', '.join(names)}"
                )
        request = request_for(loaded.manifest)
        reason = never_fits(request, capacities(pool.pool))
        if reason:
            raise PlacementError(f"compute.target: pool: this job can never run on {pool.path}: {reason}")
        return PoolJob(base_image=base.base_image, pool=pool, request=request)

    def listed_prices(self, loaded: LoadedManifest):
        return load_pool(pool_path(loaded)).pool.cost

    def prices(self, state: PoolJob | PoolSession):
        return state.pool.pool.cost if isinstance(state, PoolJob) else None

    @contextmanager
    def reserve(
        self, loaded: LoadedManifest, job: PoolJob, run_id: str, control: RunControl, logger: Logger
    ) -> Iterator[PoolSession]:
        with reserve_capacity(loaded, job, run_id, control, logger) as session:
            self.session = session
            try:
                yield session
            finally:
                self.session = None

    def environment(
        self, loaded: LoadedManifest, state: PoolJob | PoolSession, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        if isinstance(state, PoolJob):  # `tftrain plan`: where an idle pool would put it
            env = planned_environment(loaded, state.base_image, self.machine.ca_bundles)
            placement = place(state.request, capacities(state.pool.pool))
            return replace(env, placement=host_map(placement, state.pool.pool, loaded.manifest))
        session, base = state, state.job.base_image
        images = {  # every placed host's daemon, in turn: each pulls and builds for itself
            host.name: prepare_image(
                session.client(host.name),
                loaded,
                base,
                paths,
                logger,
                before_build=_building_on(host, logger),
                ca_bundles=self.machine.ca_bundles,
            )
            for host in session.hosts()
        }
        last = list(images.values())[-1]
        if last.spec is None:  # user_managed: the base image as it is, checked on every host
            return replace(as_it_is(loaded.manifest, base, last.framework), placement=session.hostmap)
        built = {host: "cached" if image.reused else "built" for host, image in images.items()}
        where = ", ".join(f"{host}: {how}" for host, how in built.items())
        details = {"image_id": last.image_id, "base_image": base, "dockerfile": last.spec.dockerfile, "hosts": built}
        return Environment(
            VENV_PYTHON,
            f"image {last.spec.tag} on the pool ({where})",
            "built" not in built.values(),
            isolated=True,
            image=last.spec.tag,
            details=details,
            placement=session.hostmap,
        )

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec]:
        view, container = container_view(loaded, env, paths, inputs, resume)
        # The mounts say what is copied in (read-only) and back (read-write). Root in the container:
        # sshd needs it, and files come back through the API, not a bind mount. Each container's
        # network is its host's.
        return view, container._replace(user="", network_mode=NetworkMode.POOL)

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        if self.session is None:
            raise PlacementError("the pool target runs only inside `tftrain run` (no placement was made)")
        return run_on_hosts.execute(self.session, plan, pump, sinks, control, logger)


def _building_on(host, logger: Logger):
    """The line before a host builds the image: which host, through which endpoint."""
    return lambda spec: logger.info(f"building {spec.tag} on {host.name} ({host.docker_endpoint})")
