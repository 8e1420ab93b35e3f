"""The docker target: the plan's tasks run in containers from the content-tagged training image.

The snapshot is mounted read-only at /workspace, outputs/ and logs/ read-write over it, so
files come back to the run directory; containers run as the invoking user and are removed in
every outcome.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import runner
from runner.targets.docker.container import LABEL_RUN, Container, docker_client, stop_all
from runner.targets.docker.build import base_image_id, build_image, existing_image
from runner.errors import PreparingError, UnsupportedError, one_line
from runner.targets.docker.registry import log_in, registry_auth
from runner.targets.user_managed import IMAGE_PYTHON, framework_version, import_failed, probe_argv
from runner.targets.docker.images import base_image_for, host_ca_bundle, image_spec
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan, Mount, TaskSpec
from runner.errors import Vanished
from runner.targets.supervise import by_policy, supervise
from runner.history.rundir import RunPaths, RuntimePaths
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, TargetState, follow
from runner.history.record import RunStatus

WORKSPACE = "/workspace"
VENV_PYTHON = "/opt/tftrain/venv/bin/python"


@dataclass(frozen=True, slots=True)
class DockerState(TargetState):
    base_image: str  # what the training image is built FROM


class DockerTarget(Target):
    name = "docker"

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> DockerState:
        return DockerState(base_image_for(loaded.manifest))

    def environment(self, loaded: LoadedManifest, state: DockerState, paths: RunPaths, logger: Logger, dry_run: bool) -> Environment:
        base = state.base_image
        manifest = loaded.manifest
        if dry_run:
            return as_it_is(manifest, base) if manifest.user_managed else _planned_environment(loaded, base)
        client = docker_client()
        auth = registry_auth(manifest)
        if auth is not None:
            log_in(client, manifest.image_registry, auth)
        if manifest.use_gpu:
            _check_gpu_runtime(client)
        base_id = base_image_id(client, base, logger, auth)
        if manifest.user_managed:
            return as_it_is(manifest, base, check_image_python(client, base, image_python(manifest)))
        spec = image_spec(loaded, base_id, host_ca_bundle())
        image_id = existing_image(client, spec.tag)
        reused = image_id is not None
        if not reused:
            image_id = build_image(client, spec, logger, paths.prepare_log)
        description = f"image {spec.tag}" + (" (cached, no build)" if reused else " (built)")
        details = {"image_id": image_id, "base_image": base, "dockerfile": spec.dockerfile}
        return Environment(VENV_PYTHON, description, reused, isolated=True, image=spec.tag, details=details)

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec]:
        manifest = loaded.manifest
        outputs, logs = f"{WORKSPACE}/{manifest.outputs_dir}", f"{WORKSPACE}/{manifest.logs_dir}"
        mounts = [
            Mount(str(paths.workdir), WORKSPACE, read_only=True),
            Mount(str(paths.outputs), outputs, read_only=False),
            Mount(str(paths.logs), logs, read_only=False),
            Mount(str(paths.metrics_dir), "/tftrain/metrics", read_only=False),
            Mount(str(Path(runner.__file__).parent), "/tftrain/python/runner", read_only=True),
        ]
        inside_inputs = {}
        for input_name, path in inputs.items():
            inside = f"/tftrain/inputs/{input_name}" + (f"/{path.name}" if path.is_file() else "")
            mounts.append(Mount(str(path), inside, read_only=True))
            inside_inputs[input_name] = inside
        inside_resume = None
        if resume is not None:
            inside_resume = "/tftrain/resume" + (f"/{resume.name}" if resume.is_file() else "")
            mounts.append(Mount(str(resume), inside_resume, read_only=True))
        view = RuntimePaths(
            workdir=WORKSPACE,
            outputs=outputs,
            logs=logs,
            metrics_dir="/tftrain/metrics",
            pythonpath="/tftrain/python",
            inputs=inside_inputs,
            resume=inside_resume,
            launch_dir="/tftrain/launch",
        )
        if plan_files_needed(manifest):
            mounts.append(Mount(str(paths.launch_dir), "/tftrain/launch", read_only=True))
        # Several containers (one per TF_CONFIG task) reach each other on 127.0.0.1: the host's network.
        several = manifest.distributed_training is not None and manifest.distributed_training.backend != "mpi"
        container = ContainerSpec(
            image=env.image or "",
            mounts=tuple(mounts),
            user=f"{os.getuid()}:{os.getgid()}",
            network_mode="host" if several else "bridge",
            shm_size=manifest.shm_size,
            memory=manifest.compute.memory_limit,
            gpus=manifest.use_gpu,
            one_stream=not env.details.get("user_managed", False),  # an image as it is may have no /bin/sh
        )
        return view, container

    def execute(self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger) -> Outcome:
        client = docker_client()
        run_id = plan.tasks[0].env["TFTRAIN_RUN_ID"]
        with ExitStack() as stack:
            started: list[tuple[TaskSpec, Container]] = []
            for task in plan.processes:
                env = {"HOME": "/tmp", **task.env}  # the invoking user has no home in the image
                label = "launcher" if task is plan.driver else str(task.rank)
                container = stack.enter_context(
                    Container(client, plan.container, task.argv, env, task.cwd, f"tftrain-{run_id}-{label}", {LABEL_RUN: run_id})
                )
                read_fd, write_fd = os.pipe()
                follow(pump, read_fd, plan, task, sinks)
                container.start(write_fd)
                started.append((task, container))
            outcome = _wait(started, plan.success_policy, control, plan.container)
        pump.join()
        return outcome


    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        yield lambda args, log, timeout: _probe_container(env, paths, args, log, timeout)


def _probe_container(env: Environment, paths: RunPaths, args: list[str], log: Path, timeout: float) -> int | None | bool:
    """The gate in a container of the run's image (when this machine's daemon has it), no network,
    the run's directory at its own path, tftrain's package read-only."""
    client = docker_client()
    try:
        client.images.get(env.image)
    except Exception:  # docker.errors.ImageNotFound: the image lives on the pool's hosts or in a cluster
        return False
    from docker.types import Mount

    mounts = [
        Mount(str(paths.root), str(paths.root), type="bind"),
        Mount("/tftrain/python/runner", str(Path(runner.__file__).parent), type="bind", read_only=True),
    ]
    container = client.containers.create(
        env.image, [env.python, "-m", "runner.serving.probe", *args],
        environment={"HOME": "/tmp", "PYTHONPATH": "/tftrain/python", "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"},
        mounts=mounts, network_mode="none", init=True, detach=True, labels={LABEL_RUN: paths.root.name},
    )
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout)["StatusCode"]
        except Exception:  # requests' ReadTimeout: past the limit
            status = None
        with log.open("ab") as out:
            out.write(container.logs(stdout=True, stderr=True))
        return status
    finally:
        container.remove(force=True)


def image_python(manifest) -> str:
    return manifest.python or IMAGE_PYTHON


def as_it_is(manifest, base: str, framework: str | None = None) -> Environment:
    """user_managed: the image runs as it is, with its own python; the code and tftrain's package
    are mounted as for a built image, so nothing is built."""
    python = image_python(manifest)
    description = f"image {base} as it is (user_managed, {python}" + (f", TensorFlow {framework})" if framework else ")")
    details = {"base_image": base, "user_managed": True, "python": python}
    if framework:
        details["framework_version"] = framework
    return Environment(python, description, True, isolated=True, image=base, details=details)


def check_image_python(client, image: str, python: str) -> str:
    """TensorFlow's version in `image`'s `python`, from a short container with no network."""
    import docker

    where = f"{python} in image {image}"
    try:
        output = client.containers.run(image, probe_argv(python), network_mode="none", remove=True, stdout=True, stderr=True)
    except docker.errors.ContainerError as exc:
        raise import_failed(where, (exc.stderr or b"").decode(errors="replace")) from None
    except docker.errors.APIError as exc:  # the daemon could not start it: no such python in the image
        raise PreparingError(f"python: {where} cannot be started ({one_line(str(exc.explanation or exc))})") from None
    return framework_version(output.decode(errors="replace"))


def _planned_environment(loaded: LoadedManifest, base: str) -> Environment:
    """For `tftrain plan`: the tag needs the base image's id, when a daemon can tell it."""
    try:
        client = docker_client()
        base_id = client.images.get(base).id
    except Exception:  # no daemon, or no base image yet: the tag then names the base by name
        base_id = None
    spec = image_spec(loaded, base_id, host_ca_bundle())
    details = {"base_image": base, "dockerfile": spec.dockerfile, "files": sorted(spec.files), "spec": spec}
    return Environment(VENV_PYTHON, f"image {spec.tag} (from {base})", False, isolated=True, image=spec.tag, details=details)


def _check_gpu_runtime(client) -> None:
    info = client.info()
    if "nvidia" not in (info.get("Runtimes") or {}) and info.get("DefaultRuntime") != "nvidia":
        raise UnsupportedError(
            "use_gpu: true, but the Docker daemon has no NVIDIA runtime (install nvidia-container-toolkit and "
            "restart dockerd); refusing to train on the CPU instead"
        )


def plan_files_needed(manifest) -> bool:
    training = manifest.distributed_training
    return training is not None and training.backend == "mpi" and training.hostfile


def _wait(started: list[tuple[TaskSpec, Container]], policy: str, control: RunControl, spec: ContainerSpec) -> Outcome:
    containers = [container for _, container in started]

    def poll() -> list[tuple[TaskSpec, int | None]]:
        return [(task, container.poll()) for task, container in started]

    def stop(grace: float) -> None:
        stop_all(containers, grace, control.force)

    outcome = supervise(by_policy(poll, stop, policy, control), stop, control)
    if outcome.status == RunStatus.FAILED and any(_out_of_memory(c) for c in containers):
        memory = spec.memory or "none"
        return Outcome(RunStatus.FAILED, outcome.exit_code, f"killed: out of memory (compute.memory_limit: {memory})", outcome.rank)
    return outcome


def _out_of_memory(container: Container) -> bool:
    try:
        return bool(container.state().get("OOMKilled"))
    except Vanished:
        return False
