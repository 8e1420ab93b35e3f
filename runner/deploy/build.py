"""The serving image on the Docker daemon: its environment (once per base image and package set)
and the model layer, built and pushed through runner.environments."""

from __future__ import annotations

import os
from pathlib import Path

from runner.errors import DeployError, DockerError
from runner.serving.image import ModelImage, VersionFiles
from runner.serving.imageref import ImageReference
from runner.settings import MachineClients
from runner.telemetry.logger import Logger


def build(
    client,
    files: VersionFiles,
    repository: str,
    base: ImageReference,
    logger: Logger,
    log_path: Path,
    verifier: bool = False,
) -> ModelImage:
    """The model image (its environment built first when this machine has none with its tag),
    tagged with both tags. `base` is parsed: only a reference of Docker's grammar is rendered.
    `verifier`: the environment holds OpenSSF model signing, for the init container that verifies
    the version's files against its model.sig (runner.serving.verify_model)."""
    from runner.environments import base_image_id, build_image, docker_errors, existing_image, host_ca_bundle
    from runner.serving.image import environment_spec, model_image_spec

    environment = environment_spec(
        base,
        base_image_id(client, str(base), logger),
        files.tensorflow,
        files.onnx,
        host_ca_bundle(MachineClients.from_environment(os.environ).ca_bundles),
        files.scoring_packages,
        verifier,
    )
    environment_id = existing_image(client, environment.tag)
    if environment_id is None:
        logger.info("building the serving environment (once per base image and package set: TensorFlow downloads now)")
        environment_id = build_image(client, environment, logger, log_path)
    else:
        logger.info(f"serving environment {environment.tag} (cached)")
    image = model_image_spec(files, repository, environment, environment_id, str(base))
    image_id = existing_image(client, image.spec.tag)
    if image_id is None:
        image_id = build_image(client, image.spec, logger, log_path)
    else:
        logger.info(f"{image.spec.tag} exists: this version was built with this content before")
    with docker_errors(f"tagging {image.tags[1]}"):
        client.images.get(image_id).tag(repository, image.version_tag)
    logger.info(f"image {image.tags[1]} = {image.tags[0]}")
    return image


def push(client, image: ModelImage, logger: Logger) -> str:
    """Push the content tag, then the version tag; the digest. The content tag goes first: if the
    registry refuses, no NAME-vN names anything; a refusal is one line (DeployError)."""
    from runner.environments import docker_errors, push_image

    for tag in image.tags:
        try:
            push_image(client, tag, logger)
        except DockerError as exc:
            pushed = (
                ""
                if tag == image.tags[0]
                else f" ({image.tags[0]} was pushed; run deploy again to add the version tag)"
            )
            raise DeployError(f"{exc}{pushed}") from None
    with docker_errors(f"reading the digest of {image.tags[1]}"):
        digests = client.images.get(image.tags[1]).attrs.get("RepoDigests") or []
    found = [entry.partition("@")[2] for entry in digests if entry.partition("@")[0] == image.repository]
    if not found:
        raise DeployError(f"pushed {image.tags[1]} but the daemon reports no digest for {image.repository}")
    return found[0]
