"""The pool target: your own GPU machines, listed in the pool file, reached over ssh and docker.

check: the pool file, `compute.hosts`, and whether the job could ever fit. reserve: the hosts'
preflight (`tftrain pool check`), then a place in the queue until leases on GPUs/slots are
taken. environment: the training image, built on every placed host through its own docker
endpoint (the Dockerfile is the docker target's, so the content tag is the same everywhere).
execute: runner.targets.pool.launch, with the session the reservation placed (kept on the target,
which serves one run).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from runner.targets.docker.build import base_image_id, build_image, existing_image
from runner.errors import ManifestError, PlacementError
from runner.targets.docker.images import host_ca_bundle, image_spec
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan
from runner.targets.pool import launch
from runner.targets.pool.dispatch import PoolJob, PoolSession, reserve as reserve_capacity
from runner.targets.pool.inventory import load_pool
from runner.targets.pool.jobs import capacities, host_map, request_for
from runner.targets.pool.schedule import never_fits, place
from runner.history.rundir import RunPaths, RuntimePaths
from runner.targets.base import Environment, Outcome, RunControl, Target
from runner.targets.docker.registry import log_in, registry_auth
from runner.targets.docker.target import VENV_PYTHON, DockerTarget, as_it_is, check_image_python, image_python


def pool_path(loaded: LoadedManifest) -> Path:
    return loaded.base_dir / loaded.manifest.compute.pool_file


class PoolTarget(DockerTarget):
    """The docker target's training image and mounts, on hosts the reservation placed the job on."""

    name = "pool"

    def __init__(self) -> None:
        self.session: PoolSession | None = None  # the placed job, between reserve and its end

    probing = Target.probing  # the image is on the pool's hosts: the gate uses an environment of its own

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> PoolJob:
        base = super().check(loaded)
        pool = load_pool(pool_path(loaded))
        compute = loaded.manifest.compute
        names = [host.name for host in pool.pool.hosts]
        for index, wanted in enumerate(compute.hosts):
            if wanted not in names:
                close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ManifestError(f"{loaded.path}: compute.hosts[{index}]: unknown host {wanted!r}; {hint}{pool.path} has {', '.join(names)}")
        request = request_for(loaded.manifest)
        reason = never_fits(request, capacities(pool.pool))
        if reason:
            raise PlacementError(f"compute.target: pool: this job can never run on {pool.path}: {reason}")
        return PoolJob(base_image=base.base_image, pool=pool, request=request)

    @contextmanager
    def reserve(self, loaded: LoadedManifest, job: PoolJob, run_id: str, control: RunControl, logger: Logger) -> Iterator[PoolSession]:
        with reserve_capacity(loaded, job, run_id, control, logger) as session:
            self.session = session
            try:
                yield session
            finally:
                self.session = None

    def environment(self, loaded: LoadedManifest, state: PoolJob | PoolSession, paths: RunPaths, logger: Logger, dry_run: bool) -> Environment:
        if isinstance(state, PoolJob):  # `tftrain plan`: where an idle pool would put it
            env = super().environment(loaded, state, paths, logger, dry_run=True)
            placement = place(state.request, capacities(state.pool.pool))
            return replace(env, placement=host_map(placement, state.pool.pool, loaded.manifest))
        session = state
        spec = None
        built: dict[str, str] = {}
        manifest = loaded.manifest
        auth = registry_auth(manifest)
        framework = None
        for host in session.hosts():
            client = session.client(host.name)
            if auth is not None:  # every host's daemon pulls for itself
                log_in(client, manifest.image_registry, auth)
            base_id = base_image_id(client, session.job.base_image, logger, auth)
            if manifest.user_managed:
                framework = check_image_python(client, session.job.base_image, image_python(manifest))
                continue
            spec = image_spec(loaded, base_id, host_ca_bundle())
            image_id = existing_image(client, spec.tag)
            if image_id is None:
                logger.info(f"building {spec.tag} on {host.name} ({host.docker_endpoint})")
                image_id = build_image(client, spec, logger, paths.prepare_log)
                built[host.name] = "built"
            else:
                built[host.name] = "cached"
        if manifest.user_managed:
            return replace(as_it_is(manifest, session.job.base_image, framework), placement=session.hostmap)
        where = ", ".join(f"{host}: {how}" for host, how in built.items())
        details = {"image_id": image_id, "base_image": session.job.base_image, "dockerfile": spec.dockerfile, "hosts": built}
        return Environment(
            VENV_PYTHON, f"image {spec.tag} on the pool ({where})", "built" not in built.values(),
            isolated=True, image=spec.tag, details=details, placement=session.hostmap,
        )

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec]:
        view, container = super().runtime(loaded, env, paths, inputs, resume)
        # The mounts say what is copied in (read-only) and back (read-write). Root in the container:
        # sshd needs it, and files come back through the API, not a bind mount. Each container's
        # network is its host's.
        return view, replace(container, user="", network_mode="pool")

    def execute(self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger) -> Outcome:
        if self.session is None:
            raise PlacementError("the pool target runs only inside `tftrain run` (no placement was made)")
        return launch.execute(self.session, plan, pump, sinks, control, logger)
