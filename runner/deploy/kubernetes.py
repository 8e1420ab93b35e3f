"""--target kubernetes: the KServe InferenceService that runs the pushed image by digest, printed on
stdout (the progress goes to stderr) and, with a kubeconfig, applied."""

from __future__ import annotations

import sys
from pathlib import Path

from runner.history.trust import Trusted
from runner.serving.image import ServingResources
from runner.telemetry.logger import Logger


def render_service(
    model,
    resources: ServingResources,
    image: str,
    logger: Logger,
    namespace: str,
    service: str | None,
    auth_secret: str | None,
    kubeconfig: Path | None,
    trusted_by: Trusted | None = None,
) -> None:
    from runner.serving.inference_service import ServiceClient, ServiceSpec, service_name, to_yaml
    from runner.serving.verify_model import Verifier

    labels = {"tftrain/model": service_name(model.name), "tftrain/version": f"v{model.version}"}
    verifier = Verifier.of(trusted_by, model.name) if trusted_by is not None else None
    spec = ServiceSpec(service_name(service or model.name), namespace, image, resources, labels, auth_secret, verifier)
    document = spec.document()
    logger.flush()
    # stdout is the YAML alone (progress goes to stderr), through the same masking as every sink
    sys.stdout.write(logger.masker.text(to_yaml(document)))
    sys.stdout.flush()
    if kubeconfig:
        done = ServiceClient(kubeconfig, document).apply()
        logger.info(f"{done} InferenceService {spec.namespace}/{spec.name}", style="green")
