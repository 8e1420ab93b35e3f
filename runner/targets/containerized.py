"""The parts the container targets share (docker, pool, kubernetes), composed rather than inherited.

The training image as a run's Environment (`image_environment`, built on this machine's daemon by
runner.environments; `planned_environment` for `tftrain plan`), the container's view of the run
(`container_view`: the snapshot read-only at /workspace, outputs/ and logs/ read-write over it,
inputs and the resume point read-only), an image used as it is (`as_it_is`), and the model gate in
a container of the run's image (`probe_in_container`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import runner
from runner.environments import VENV_PYTHON, base_image_for, docker_client, image_python, planned_image, prepare_image
from runner.history.rundir import RunPaths, RuntimePaths
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, Mount, NetworkMode
from runner.targets.base import Environment, TargetState
from runner.targets.container import LABEL_RUN
from runner.telemetry.logger import Logger

WORKSPACE = "/workspace"


@dataclass(frozen=True, slots=True)
class ImageState(TargetState):
    """What a container target's check found: the base image its training image is built FROM."""

    base_image: str


def image_state(loaded: LoadedManifest) -> ImageState:
    """The base image (custom_docker_image, or the official one for framework_version), or a refusal."""
    return ImageState(base_image_for(loaded.manifest))


def image_environment(
    loaded: LoadedManifest, base: str, paths: RunPaths, logger: Logger, dry_run: bool, ca_bundles: Sequence[str] = ()
) -> Environment:
    """The training image on this machine's daemon, FROM `base` (or `base` as it is, user_managed).
    `ca_bundles`: the CA files pip on this machine trusts (Settings.machine), for pip in the build."""
    manifest = loaded.manifest
    if dry_run:
        return planned_environment(loaded, base, ca_bundles)
    image = prepare_image(
        docker_client(), loaded, base, paths, logger, gpu_runtime=manifest.use_gpu, ca_bundles=ca_bundles
    )
    if image.spec is None:
        return as_it_is(manifest, base, image.framework)
    description = f"image {image.spec.tag}" + (" (cached, no build)" if image.reused else " (built)")
    details = {"image_id": image.image_id, "base_image": base, "dockerfile": image.spec.dockerfile}
    return Environment(VENV_PYTHON, description, image.reused, isolated=True, image=image.spec.tag, details=details)


def planned_environment(loaded: LoadedManifest, base: str, ca_bundles: Sequence[str] = ()) -> Environment:
    """For `tftrain plan`: the image a run would build (or use as it is), nothing built or pulled."""
    if loaded.manifest.user_managed:
        return as_it_is(loaded.manifest, base)
    spec = planned_image(loaded, base, ca_bundles)
    details = {"base_image": base, "dockerfile": spec.dockerfile, "files": sorted(spec.files), "spec": spec}
    return Environment(
        VENV_PYTHON, f"image {spec.tag} (from {base})", False, isolated=True, image=spec.tag, details=details
    )


def container_view(
    loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
) -> tuple[RuntimePaths, ContainerSpec]:
    """The run's paths as a container of `env.image` sees them, and the container to run."""
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
        network_mode=NetworkMode.HOST if several else NetworkMode.BRIDGE,
        shm_size=manifest.shm_size,
        memory=manifest.compute.memory_limit,
        gpus=manifest.use_gpu,
        one_stream=not env.details.get("user_managed", False),  # an image as it is may have no /bin/sh
    )
    return view, container


def plan_files_needed(manifest) -> bool:
    training = manifest.distributed_training
    return training is not None and training.backend == "mpi" and training.hostfile


def as_it_is(manifest, base: str, framework: str | None = None) -> Environment:
    """user_managed: the image runs as it is, with its own python; the code and tftrain's package
    are mounted as for a built image, so nothing is built."""
    python = image_python(manifest)
    description = f"image {base} as it is (user_managed, {python}" + (
        f", TensorFlow {framework})" if framework else ")"
    )
    details = {"base_image": base, "user_managed": True, "python": python}
    if framework:
        details["framework_version"] = framework
    return Environment(python, description, True, isolated=True, image=base, details=details)


def probe_in_container(
    env: Environment, paths: RunPaths, args: list[str], log: Path, timeout: float
) -> int | None | bool:
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
        env.image,
        [env.python, "-m", "runner.serving.model_check", *args],
        environment={
            "HOME": "/tmp",
            "PYTHONPATH": "/tftrain/python",
            "CUDA_VISIBLE_DEVICES": "-1",
            "TF_CPP_MIN_LOG_LEVEL": "2",
        },
        mounts=mounts,
        network_mode="none",
        init=True,
        detach=True,
        labels={LABEL_RUN: paths.root.name},
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
