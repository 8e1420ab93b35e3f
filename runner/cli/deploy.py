"""tftrain deploy REF --image REPOSITORY [--push] [--target docker|kubernetes]: a registered
version as a serving image, proven before it is published. This module is the command line: its
options checked in one line each, then the stage (runner/deploy/stage.py) with typed arguments.

Build (the environment image once per machine and package set, then the model layer), run it with
the version's serving resources, wait until the server is ready, send serving/sample.npz through
`POST /v1/models/NAME:predict` and compare the answer with serving/predictions.npz, stop it; only
then push both tags (with --push) and print the digest. --target kubernetes also renders the KServe
InferenceService that runs the image by digest, and applies it with --kubeconfig.

Every image reference is parsed (runner.serving.imageref) before anything is looked up, built or
rendered: a bad one is one UsageError line. The image holds no key: with --auth-secret the
InferenceService hands the server TFTRAIN_SERVING_TOKEN from a Kubernetes secret, and the smoke
test proves the image refuses a request without it. With --verify-key, nothing is built unless the
copy verifies against model.sig; the image then holds model.sig and OpenSSF model signing, and the
InferenceService gains an init container that verifies /models/NAME before the server starts.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from runner.cli.verifying import add_verify_arguments, trusted
from runner.deploy.stage import DeployRequest, DeployTarget, deploy
from runner.errors import DeployError, UsageError
from runner.serving.guard import TOKEN_VARIABLE
from runner.serving.image import DEFAULT_BASE_IMAGE
from runner.serving.imageref import parse_reference, parse_repository

READY_SECONDS = 300.0  # importing TensorFlow under a 1-CPU limit takes a while
# A Kubernetes object's name (a secret's, a namespace's): a DNS-1123 label or subdomain.
DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def add_arguments(parser) -> None:
    parser.add_argument("ref", help="NAME@vN or NAME@latest")
    parser.add_argument(
        "--image", required=True, help="the image repository, without a tag: REGISTRY/REPO (tagged NAME-vN and sha-…)"
    )
    parser.add_argument(
        "--push", action="store_true", help="push both tags once the smoke test passed, and print the digest"
    )
    parser.add_argument(
        "--target",
        choices=("docker", "kubernetes"),
        default="docker",
        help="kubernetes: also print a KServe InferenceService for the pushed image (the progress goes to stderr)",
    )
    parser.add_argument(
        "--kubeconfig", type=Path, help="with --target kubernetes: apply the InferenceService to this cluster"
    )
    parser.add_argument("--namespace", default="default", help="the InferenceService's namespace (default: default)")
    parser.add_argument("--service-name", help="the InferenceService's name (default: the model's name as a DNS label)")
    parser.add_argument(
        "--base-image",
        default=DEFAULT_BASE_IMAGE,
        help=f"the serving environment's base (default {DEFAULT_BASE_IMAGE})",
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=READY_SECONDS, help="seconds the server may take to be ready"
    )
    parser.add_argument(
        "--release",
        metavar="TAG",
        help="with --push: link the image by digest in this GitHub release's body (the action's deploy-image)",
    )
    parser.add_argument(
        "--auth-secret",
        metavar="SECRET",
        help=(
            "with --target kubernetes: the server requires `Authorization: Bearer KEY`, KEY from the key `token` of "
            f"this Kubernetes secret (as {TOKEN_VARIABLE}); the smoke test proves the image refuses requests without it"
        ),
    )
    add_verify_arguments(
        parser, "build, and with --target kubernetes start the server (an init container verifies it),"
    )


def run(args, logger) -> int:
    repository = parse_repository(args.image, "--image")
    base = parse_reference(args.base_image, "--base-image")
    _check_kubernetes_names(args)
    if not (math.isfinite(args.ready_timeout) and 0 < args.ready_timeout <= 86_400):  # nan, inf: an endless wait
        raise UsageError(f"--ready-timeout {args.ready_timeout}: give seconds between 0 and 86400")
    if args.auth_secret and args.target != "kubernetes":
        raise UsageError(
            "--auth-secret names a Kubernetes secret: add --target kubernetes (with docker, run the image with -e"
            f" {TOKEN_VARIABLE})"
        )
    if args.kubeconfig and args.target != "kubernetes":
        raise UsageError("--kubeconfig applies an InferenceService: add --target kubernetes")
    if args.service_name is not None and args.target != "kubernetes":
        raise UsageError("--service-name names an InferenceService: add --target kubernetes")
    trusted_by = trusted(args)  # said before the registry or the daemon is asked anything
    if args.release and not args.push:
        raise UsageError("--release links the pushed image: add --push")
    if args.target == "kubernetes" and not args.push:
        raise UsageError("--target kubernetes runs the image by its registry digest: add --push")
    request = DeployRequest(
        args.ref,
        repository,
        base,
        DeployTarget(args.target),
        args.push,
        args.release,
        args.ready_timeout,
        args.namespace,
        args.service_name,
        args.kubeconfig,
        args.auth_secret,
        trusted_by,
    )
    if request.target is DeployTarget.KUBERNETES:  # stdout is the InferenceService's YAML
        progress = logger.on_stderr()
        try:
            deploy(request, progress)
        finally:
            progress.flush()
        return 0
    deploy(request, logger)
    return 0


def _check_kubernetes_names(args) -> None:
    """Names that go into the InferenceService, refused in one line before anything is built."""
    from runner.serving.inference_service import service_name

    for option, value in (("--namespace", args.namespace), ("--auth-secret", args.auth_secret)):
        if value is not None and (len(value) > 253 or not DNS_1123.fullmatch(value)):
            raise UsageError(
                f"{option} {_shown(value)} is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most"
                " 253)"
            )
    if args.service_name is not None:
        try:
            service_name(args.service_name)
        except DeployError:
            raise UsageError(
                f"--service-name {_shown(args.service_name)} makes no InferenceService name (a DNS-1035 label: "
                "it must hold a letter before any digit; other characters become '-')"
            ) from None


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "…")
