"""The training image on one Docker daemon: the steps every container target takes, written once.

Log in to a private registry, pull the base image, then either check the image's own python
(`user_managed`) or build the content-tagged image unless the daemon has it. The docker target
does this on this machine's daemon, the pool on each placed host's; the Kubernetes target builds
its code image FROM the result (`push_code_image`). The Dockerfile is the same everywhere, so the
tag is too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import runner
from runner.environments.daemon import docker_client, log_in, registry_auth
from runner.environments.image_build import (
    base_image_id,
    build_code_image,
    build_image,
    existing_image,
    push_image,
    trees_digest,
)
from runner.environments.images import ImageSpec, host_ca_bundle, image_spec
from runner.environments.user_managed import check_image_python, image_python, require_tf_keras, tf_keras_in_image
from runner.errors import UnsupportedError
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.manifest.legacy_keras import keras_choice
from runner.telemetry.logger import Logger


class DaemonImage(NamedTuple):
    """What one daemon holds for the run once prepare_image has returned."""

    spec: ImageSpec | None  # None: user_managed, the base image runs as it is
    image_id: str | None
    reused: bool  # the daemon had the image (never built here)
    framework: str | None = None  # user_managed: TensorFlow's version in the image's python


def prepare_image(
    client,
    loaded: LoadedManifest,
    base: str,
    paths: RunPaths,
    logger: Logger,
    gpu_runtime: bool = False,
    before_build: Callable[[ImageSpec], None] | None = None,
    ca_bundles: Sequence[str] = (),
) -> DaemonImage:
    """The training image on `client`'s daemon, built when missing (its log: the run's prepare log).
    `gpu_runtime`: refuse a daemon without the NVIDIA runtime before anything is pulled (the docker
    target's own daemon; the pool's preflight checks its hosts). `before_build`: called with the spec
    before a build starts (the pool says which host builds). `ca_bundles`: runner.settings.MachineClients'."""
    manifest = loaded.manifest
    auth = registry_auth(manifest)
    if auth is not None:  # every daemon pulls for itself
        log_in(client, manifest.image_registry, auth)
    if gpu_runtime:
        check_gpu_runtime(client)
    base_id = base_image_id(client, base, logger, auth)
    if manifest.user_managed:
        python = image_python(manifest)
        framework = check_image_python(client, base, python, base_id)
        if keras_choice(manifest, framework).legacy:
            require_tf_keras(manifest, framework, f"{python} in image {base}", tf_keras_in_image(client, base, python))
        return DaemonImage(None, None, True, framework)
    spec = image_spec(loaded, base_id, host_ca_bundle(ca_bundles))
    image_id = existing_image(client, spec.tag)
    if image_id is not None:
        return DaemonImage(spec, image_id, True)
    if before_build is not None:
        before_build(spec)
    return DaemonImage(spec, build_image(client, spec, logger, paths.prepare_log), False)


def planned_image(loaded: LoadedManifest, base: str, ca_bundles: Sequence[str] = ()) -> ImageSpec:
    """For `tftrain plan`: the spec whose tag names the base image's id, when a daemon can tell it."""
    try:
        base_id = docker_client().images.get(base).id
    except Exception:  # no daemon, or no base image yet: the tag then names the base by name
        base_id = None
    return image_spec(loaded, base_id, host_ca_bundle(ca_bundles))


def push_code_image(loaded: LoadedManifest, training_image: str, registry: str, paths: RunPaths, logger: Logger) -> str:
    """FROM the training image, the run's snapshot and tftrain's runner copied in, pushed to
    `registry`: for a cluster, which cannot mount this machine's files. Tagged by the training
    image's tag and the code's digest, so an unchanged snapshot is neither rebuilt nor re-tagged."""
    trees = {"workspace": paths.workdir, "runner": Path(runner.__file__).parent}
    code = trees_digest(trees)
    repository, _, env_tag = training_image.rpartition(":")
    tag = f"{registry}/{repository}:{env_tag[:12]}-{code[:12]}"
    client = docker_client()
    auth = registry_auth(loaded.manifest)
    if auth is not None:  # the code image may go to the same private registry
        log_in(client, loaded.manifest.image_registry, auth)
    if existing_image(client, tag) is None:
        build_code_image(client, training_image, trees, tag, logger, paths.prepare_log)
    push_image(client, tag, logger)
    return tag


def check_gpu_runtime(client) -> None:
    info = client.info()
    if "nvidia" not in (info.get("Runtimes") or {}) and info.get("DefaultRuntime") != "nvidia":
        raise UnsupportedError(
            "use_gpu: true, but the Docker daemon has no NVIDIA runtime (install nvidia-container-toolkit and "
            "restart dockerd); refusing to train on the CPU instead"
        )
