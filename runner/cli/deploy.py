"""tftrain deploy REF --image REPOSITORY [--push] [--target docker|kubernetes]: a registered
version as a serving image, proven before it is published.

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
import os
import re
import secrets
import sys
import tempfile
import time
from pathlib import Path

from runner.errors import DeployError, DockerError, UsageError
from runner.history.model_registry import Registry
from runner.cli.verifying import add_verify_arguments, trusted, verify_copy
from runner.history.checksums import copy_file
from runner.history.sealing import copy_signature
from runner.history.signing import SIGNATURE
from runner.history.trust import Trusted
from runner.history.store import Store
from runner.paths import tftrain_home
from runner.settings import MachineClients
from runner.serving.guard import TOKEN_VARIABLE
from runner.serving.image import DEFAULT_BASE_IMAGE, PORT, ModelImage, ServingResources, VersionFiles, copy_version
from runner.serving.imageref import ImageReference, parse_reference, parse_repository
from runner.telemetry.logger import Logger

READY_SECONDS = 300.0  # importing TensorFlow under a 1-CPU limit takes a while
TOLERANCE = 1e-4
# A Kubernetes object's name (a secret's, a namespace's): a DNS-1123 label or subdomain.
DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def add_arguments(parser) -> None:
    parser.add_argument("ref", help="NAME@vN or NAME@latest")
    parser.add_argument("--image", required=True, help="the image repository, without a tag: REGISTRY/REPO (tagged NAME-vN and sha-…)")
    parser.add_argument("--push", action="store_true", help="push both tags once the smoke test passed, and print the digest")
    parser.add_argument("--target", choices=("docker", "kubernetes"), default="docker",
                        help="kubernetes: also print a KServe InferenceService for the pushed image (the progress goes to stderr)")
    parser.add_argument("--kubeconfig", type=Path, help="with --target kubernetes: apply the InferenceService to this cluster")
    parser.add_argument("--namespace", default="default", help="the InferenceService's namespace (default: default)")
    parser.add_argument("--service-name", help="the InferenceService's name (default: the model's name as a DNS label)")
    parser.add_argument("--base-image", default=DEFAULT_BASE_IMAGE, help=f"the serving environment's base (default {DEFAULT_BASE_IMAGE})")
    parser.add_argument("--ready-timeout", type=float, default=READY_SECONDS, help="seconds the server may take to be ready")
    parser.add_argument("--release", metavar="TAG", help="with --push: link the image by digest in this GitHub release's body (the action's deploy-image)")
    parser.add_argument("--auth-secret", metavar="SECRET",
                        help=f"with --target kubernetes: the server requires `Authorization: Bearer KEY`, KEY from the key `token` of "
                             f"this Kubernetes secret (as {TOKEN_VARIABLE}); the smoke test proves the image refuses requests without it")
    add_verify_arguments(parser, "build, and with --target kubernetes start the server (an init container verifies it),")


def run(args, logger) -> int:
    repository = parse_repository(args.image, "--image")
    base = parse_reference(args.base_image, "--base-image")
    _check_kubernetes_names(args)
    if not (math.isfinite(args.ready_timeout) and 0 < args.ready_timeout <= 86_400):  # nan, inf: an endless wait
        raise UsageError(f"--ready-timeout {args.ready_timeout}: give seconds between 0 and 86400")
    if args.auth_secret and args.target != "kubernetes":
        raise UsageError(f"--auth-secret names a Kubernetes secret: add --target kubernetes (with docker, run the image with -e {TOKEN_VARIABLE})")
    if args.kubeconfig and args.target != "kubernetes":
        raise UsageError("--kubeconfig applies an InferenceService: add --target kubernetes")
    if args.service_name is not None and args.target != "kubernetes":
        raise UsageError("--service-name names an InferenceService: add --target kubernetes")
    trusted_by = trusted(args)  # said before the registry or the daemon is asked anything
    if args.release and not args.push:
        raise UsageError("--release links the pushed image: add --push")
    if args.target == "kubernetes" and not args.push:
        raise UsageError("--target kubernetes runs the image by its registry digest: add --push")
    if args.target == "kubernetes":  # stdout is the InferenceService's YAML
        progress = Logger(sys.stderr, settings=logger.settings)
        try:
            return deploy(args, repository, base, progress, trusted_by)
        finally:
            progress.flush()
    return deploy(args, repository, base, logger, trusted_by)


def _check_kubernetes_names(args) -> None:
    """Names that go into the InferenceService, refused in one line before anything is built."""
    from runner.serving.inference_service import service_name

    for option, value in (("--namespace", args.namespace), ("--auth-secret", args.auth_secret)):
        if value is not None and (len(value) > 253 or not DNS_1123.fullmatch(value)):
            raise UsageError(f"{option} {_shown(value)} is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most 253)")
    if args.service_name is not None:
        try:
            service_name(args.service_name)
        except DeployError:
            raise UsageError(f"--service-name {_shown(args.service_name)} makes no InferenceService name (a DNS-1035 label: "
                             "it must hold a letter before any digit; other characters become '-')") from None


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "…")


def deploy(args, repository: str, base: ImageReference, logger: Logger, trusted_by: Trusted | None = None) -> int:
    with Store(tftrain_home()) as store:
        model = Registry(store).resolve(args.ref)
    resources = ServingResources.of(model.info)
    if args.target == "kubernetes":  # the model's name as the service's: said before anything is built or pushed
        from runner.serving.inference_service import service_name

        service_name(args.service_name or model.name)
    from runner.environments import docker_client

    log_path = tftrain_home() / "deploys" / f"{model.name}-v{model.version}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tftrain-deploy-") as scratch:
        if trusted_by is not None:  # the copy is checked against a copy of model.sig: what is built is what was signed
            signature = copy_signature(model, Path(scratch) / SIGNATURE)
        files = copy_version(model, Path(scratch) / "version")
        if trusted_by is not None:
            verify_copy(files.root, signature, trusted_by, model.label, logger)  # model/ and all that is built with it
            # the image holds the signature beside the version (as the registry does): its init container verifies them
            copy_file(signature, files.root / SIGNATURE)
        client = docker_client()  # the daemon is asked for nothing before the files are known good
        image = build(client, files, repository, base, logger, log_path, verifier=trusted_by is not None)
        smoke_test(client, image, files, resources, args.ready_timeout, logger, auth=bool(args.auth_secret))
    outputs = {"image": image.tags[1]}
    if args.push:
        digest = push(client, image, logger)
        outputs = {"image": f"{repository}@{digest}", "image-digest": digest}
        logger.info(f"{repository}@{digest}", style="bold green")
        if args.release:
            link_release(args.release, image, digest, logger)
    logger.outputs(outputs)
    if args.target == "kubernetes":
        _kubernetes(args, model, resources, outputs["image"], logger, trusted_by)
    return 0


def build(client, files: VersionFiles, repository: str, base: ImageReference, logger: Logger, log_path: Path,
          verifier: bool = False) -> ModelImage:
    """The model image (its environment built first when this machine has none with its tag),
    tagged with both tags. `base` is parsed: only a reference of Docker's grammar is rendered.
    `verifier`: the environment holds OpenSSF model signing, for the init container that verifies
    the version's files against its model.sig (runner.serving.verify_model)."""
    from runner.serving.image import environment_spec, model_image_spec
    from runner.environments import base_image_id, build_image, docker_errors, existing_image, host_ca_bundle

    environment = environment_spec(base, base_image_id(client, str(base), logger), files.tensorflow, files.onnx,
                                   host_ca_bundle(MachineClients.from_environment(os.environ).ca_bundles), files.scoring_packages, verifier)
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


def smoke_test(
    client, image: ModelImage, files: VersionFiles, resources: ServingResources, ready_timeout: float, logger: Logger, auth: bool = False
) -> None:
    """Run the image as it will be run (the serving resources' limits), wait for the server to be
    ready, predict on the recorded sample and compare; the container is always removed. With
    `auth`, the server gets a random key in TFTRAIN_SERVING_TOKEN (as the InferenceService's secret
    gives it) and must refuse a predict without it: a deploy never claims a key it does not enforce."""
    from runner.environments import docker_errors

    name = files.model.name
    auth = auth or bool((files.scoring or {}).get("auth"))  # model.serving.auth: the image refuses to start without a key
    token = secrets.token_urlsafe(32) if auth else None
    if token:
        logger.mask(token)
    if resources.gpu:
        logger.info(f"serving_resources.gpu {resources.gpu}: the smoke test runs on CPU (the image holds CPU TensorFlow)")
    memory = resources.memory_bytes()
    with docker_errors(f"starting {image.tags[0]}"):
        container = client.containers.run(
            image.tags[0],
            detach=True,
            ports={f"{PORT}/tcp": ("127.0.0.1", None)},
            nano_cpus=resources.nano_cpus(),
            mem_limit=memory,
            memswap_limit=memory,
            init=True,  # SIGTERM reaches the server: stopping it below is how a cluster stops it
            labels={"tftrain.deploy": files.model.label},
            environment={TOKEN_VARIABLE: token} if token else None,
        )
    try:
        container.reload()
        base = f"http://127.0.0.1:{container.ports[f'{PORT}/tcp'][0]['HostPort']}"
        url = f"{base}/v1/models/{name}"
        logger.info(f"smoke test: {image.tags[0]} with cpu {resources.cpu}, memory {resources.memory}")
        if files.scoring is not None:  # Azure's contract: liveness once init() ran, then the sample posted to /score
            from runner.serving.scoring.smoke import smoke_scoring

            _wait_ready(container, f"{base}/", ready_timeout)
            smoke_scoring(base, files, token, logger)
            _stop(container, logger)
            return
        _wait_ready(container, url, ready_timeout, token)
        if token:
            _refuses_without_key(url)
            logger.info(f"smoke test: a predict without the key was refused ({TOKEN_VARIABLE} is enforced)")
        if files.sample is None:
            logger.info("smoke test: ready (a version without serving/: the server's own sample prediction passed)")
        else:
            difference = _compare(_predict(url, files.sample, token), files.predictions)
            logger.info(f"smoke test: the sample's predictions match the gate's (max |Δ| {difference:.2g})", style="green")
        _stop(container, logger)
    finally:
        try:
            container.remove(force=True)
        except Exception:  # gone already, or the daemon went away: nothing of ours is left to hold
            pass


def _stop(container, logger: Logger) -> None:
    container.stop(timeout=30)
    code = container.wait(timeout=60).get("StatusCode")
    if code != 0:
        logger.warning(f"smoke test: the server exited with {code} on SIGTERM (expected 0: drained)")


def _request(url: str, body: bytes | None, token: str | None, timeout: float):
    """An open answer from the server (GET, or POST of a JSON body), with the key when given."""
    import urllib.request

    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.urlopen(urllib.request.Request(url, body, headers, method="GET" if body is None else "POST"), timeout=timeout)


def _wait_ready(container, url: str, timeout: float, token: str | None = None) -> None:
    import urllib.error

    deadline = time.monotonic() + timeout
    while True:
        try:
            with _request(url, None, token, 5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):  # not listening yet: the port opens once the model is loaded
            pass
        container.reload()
        if container.status in ("exited", "dead"):
            code = container.attrs.get("State", {}).get("ExitCode")
            raise DeployError(f"smoke test: the server exited with {code} before it was ready: {_last_line(container)}")
        if time.monotonic() > deadline:
            raise DeployError(f"smoke test: the server was not ready within {timeout:.0f}s: {_last_line(container)}")
        time.sleep(0.5)


def _refuses_without_key(url: str) -> None:
    """A predict without `Authorization` must be answered 401 before its body is looked at."""
    import urllib.error

    try:
        with _request(f"{url}:predict", b'{"instances": []}', None, 30) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        raise DeployError(f"smoke test: a predict without the key failed: {exc}") from None
    if status != 401:
        raise DeployError(f"smoke test: a predict without the key was answered {status}, not 401: the image does not enforce {TOKEN_VARIABLE}")


def _last_line(container) -> str:
    text = container.logs(tail=20).decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _predict(url: str, sample: Path, token: str | None = None):
    """The server's predictions for the sample, sent in TensorFlow Serving's row form."""
    import json
    import urllib.error

    import numpy as np

    with np.load(sample, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    if len(arrays) == 1:
        instances = next(iter(arrays.values())).tolist()
    else:
        rows = len(next(iter(arrays.values())))
        instances = [{key: value[row].tolist() for key, value in arrays.items()} for row in range(rows)]
    try:
        with _request(f"{url}:predict", json.dumps({"instances": instances}).encode(), token, 60) as answer:
            return json.loads(answer.read())["predictions"]
    except urllib.error.HTTPError as exc:
        raise DeployError(f"smoke test: predict answered {exc.code}: {exc.read().decode(errors='replace').strip()[:300]}") from None
    except (OSError, ValueError, KeyError) as exc:
        raise DeployError(f"smoke test: predict failed: {exc}") from None


def _compare(predictions, expected_file: Path) -> float:
    """The largest difference from the gate's predictions, or DeployError past the tolerance."""
    import numpy as np

    with np.load(expected_file, allow_pickle=False) as archive:
        expected = {key: archive[key] for key in archive.files}
    if len(expected) == 1:
        got = {next(iter(expected)): predictions}
    elif isinstance(predictions, list) and all(isinstance(row, dict) for row in predictions):
        got = {key: [row.get(key) for row in predictions] for key in expected}
    else:
        raise DeployError(f"smoke test: predictions are not rows of {{{', '.join(sorted(expected))}}}")
    worst = 0.0
    for key, want in sorted(expected.items()):
        try:
            have = np.asarray(got[key], dtype=want.dtype)
        except (TypeError, ValueError):
            raise DeployError(f"smoke test: output {key!r} is not {want.dtype}") from None
        if have.shape != want.shape:
            raise DeployError(f"smoke test: output {key!r} has shape {have.shape}, the gate's {want.shape}")
        if want.dtype.kind in "fciub":
            worst = max(worst, float(np.max(np.abs(have.astype(float) - want.astype(float)), initial=0.0)))
        elif not np.array_equal(have, want):
            worst = float("inf")
        if worst > TOLERANCE:
            raise DeployError(f"smoke test: output {key!r} differs from the gate's predictions by {worst:.3g} (tolerance {TOLERANCE})")
    return worst


def push(client, image: ModelImage, logger: Logger) -> str:
    """Push the content tag, then the version tag; the digest. The content tag goes first: if the
    registry refuses, no NAME-vN names anything; a refusal is one line (DeployError)."""
    from runner.environments import docker_errors, push_image

    for tag in image.tags:
        try:
            push_image(client, tag, logger)
        except DockerError as exc:
            pushed = "" if tag == image.tags[0] else f" ({image.tags[0]} was pushed; run deploy again to add the version tag)"
            raise DeployError(f"{exc}{pushed}") from None
    with docker_errors(f"reading the digest of {image.tags[1]}"):
        digests = client.images.get(image.tags[1]).attrs.get("RepoDigests") or []
    found = [entry.partition("@")[2] for entry in digests if entry.partition("@")[0] == image.repository]
    if not found:
        raise DeployError(f"pushed {image.tags[1]} but the daemon reports no digest for {image.repository}")
    return found[0]


RELEASE_MARKER = "<!-- tftrain:serving-image -->"


def link_release(tag: str, image: ModelImage, digest: str, logger: Logger) -> None:
    """The release body gains (or updates) one line naming the image by digest: the release
    always points at the bytes that were smoke-tested, whatever happens to the tags later."""
    import os

    from runner.github import workflow
    from runner.settings import resolve

    line = f"{RELEASE_MARKER}**Serving image:** `{image.repository}@{digest}` (tags `{image.version_tag}`, `{image.content_tag}`)"
    with workflow.github_errors(DeployError):
        release = workflow.client(resolve(os.environ).github).get_repo(resolve(os.environ).github.repository).get_release(tag)
        kept = [text for text in (release.body or "").splitlines() if not text.startswith(RELEASE_MARKER)]
        body = "\n".join([*kept, "", line]).strip("\n") + "\n"
        release.update_release(name=release.name or tag, message=body, draft=release.draft, prerelease=release.prerelease)
    logger.info(f"release {tag} links {image.repository}@{digest}")


def _kubernetes(args, model, resources: ServingResources, image: str, logger: Logger, trusted_by: Trusted | None = None) -> None:
    from runner.serving.inference_service import ServiceClient, ServiceSpec, service_name, to_yaml
    from runner.serving.verify_model import Verifier

    labels = {"tftrain/model": service_name(model.name), "tftrain/version": f"v{model.version}"}
    verifier = Verifier.of(trusted_by, model.name) if trusted_by is not None else None
    spec = ServiceSpec(service_name(args.service_name or model.name), args.namespace, image, resources, labels, args.auth_secret, verifier)
    document = spec.document()
    logger.flush()
    # stdout is the YAML alone (progress goes to stderr), through the same masking as every sink
    sys.stdout.write(logger.masker.text(to_yaml(document)))
    sys.stdout.flush()
    if args.kubeconfig:
        done = ServiceClient(args.kubeconfig, document).apply()
        logger.info(f"{done} InferenceService {spec.namespace}/{spec.name}", style="green")
