"""The deploy stage: a registered version copied (checksums, and with whom to trust its model.sig)
into a scratch directory, built into an image, smoke-tested, and only then pushed, linked from its
release and rendered as an InferenceService. Arguments are typed (DeployRequest): the command line
is runner/cli/deploy.py's."""

from __future__ import annotations

import enum
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.deploy.build import build, push
from runner.deploy.kubernetes import render_service
from runner.deploy.release import link_release
from runner.deploy.smoke import smoke_test
from runner.history.checksums import copy_file
from runner.history.model_registry import Registry
from runner.history.sealing import copy_signature
from runner.history.signing import SIGNATURE, verify_copy
from runner.history.store import Store
from runner.history.trust import Trusted
from runner.paths import tftrain_home
from runner.serving.image import ServingResources, copy_version
from runner.serving.imageref import ImageReference
from runner.telemetry.logger import Logger


class DeployTarget(enum.Enum):
    DOCKER = "docker"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class DeployRequest:
    ref: str  # NAME@vN, NAME@latest
    repository: str  # REGISTRY/REPO, parsed
    base: ImageReference
    target: DeployTarget = DeployTarget.DOCKER
    push: bool = False
    release: str | None = None  # a GitHub release tag whose body links the pushed image
    ready_timeout: float = 300.0
    namespace: str = "default"
    service_name: str | None = None
    kubeconfig: Path | None = None
    auth_secret: str | None = None  # a Kubernetes secret holding the server's key
    trusted_by: Trusted | None = None  # whom model.sig must come from; None: not verified


def deploy(request: DeployRequest, logger: Logger) -> dict[str, str]:
    """Deploy `request`; the step outputs (image, image-digest)."""
    with Store(tftrain_home()) as store:
        model = Registry(store).resolve(request.ref)
    resources = ServingResources.of(model.info)
    # the model's name as the service's: said before anything is built or pushed
    if request.target is DeployTarget.KUBERNETES:
        from runner.serving.inference_service import service_name

        service_name(request.service_name or model.name)
    from runner.environments import docker_client

    log_path = tftrain_home() / "deploys" / f"{model.name}-v{model.version}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tftrain-deploy-") as scratch:
        files = _verified_copy(model, Path(scratch), request.trusted_by, logger)
        client = docker_client()  # the daemon is asked for nothing before the files are known good
        image = build(
            client, files, request.repository, request.base, logger, log_path, verifier=request.trusted_by is not None
        )
        smoke_test(client, image, files, resources, request.ready_timeout, logger, auth=bool(request.auth_secret))
    outputs = {"image": image.tags[1]}
    if request.push:
        digest = push(client, image, logger)
        outputs = {"image": f"{request.repository}@{digest}", "image-digest": digest}
        logger.info(f"{request.repository}@{digest}", style="bold green")
        if request.release:
            link_release(request.release, image, digest, logger)
    logger.outputs(outputs)
    if request.target is DeployTarget.KUBERNETES:
        render_service(
            model,
            resources,
            outputs["image"],
            logger,
            request.namespace,
            request.service_name,
            request.auth_secret,
            request.kubeconfig,
            request.trusted_by,
        )
    return outputs


def _verified_copy(model, scratch: Path, trusted_by: Trusted | None, logger: Logger):
    """The version copied into `scratch` (checksums checked); with `trusted_by`, checked against a
    copy of model.sig taken first, which the image then holds beside the version (as the registry
    does) for its init container (runner.serving.verify_model)."""
    if trusted_by is None:
        return copy_version(model, scratch / "version")
    signature = copy_signature(model, scratch / SIGNATURE)
    files = copy_version(model, scratch / "version")
    verify_copy(files.root, signature, trusted_by, model.label, logger)  # model/ and all that is built with it
    copy_file(signature, files.root / SIGNATURE)
    return files
