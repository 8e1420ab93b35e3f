"""The smoke test: the image run as a cluster will run it (the serving resources' limits, SIGTERM
to stop), ready, the recorded sample predicted and compared with the gate's predictions, and,
with a key, a request without it refused. The container is always removed."""

from __future__ import annotations

import secrets
from pathlib import Path

from runner.errors import DeployError
from runner.serving.guard import TOKEN_VARIABLE
from runner.serving.image import PORT, ModelImage, ServingResources, VersionFiles
from runner.serving.readiness import Waited, wait_ready
from runner.telemetry.logger import Logger

TOLERANCE = 1e-4


def smoke_test(
    client,
    image: ModelImage,
    files: VersionFiles,
    resources: ServingResources,
    ready_timeout: float,
    logger: Logger,
    auth: bool = False,
) -> None:
    """Run the image as it will be run (the serving resources' limits), wait for the server to be
    ready, predict on the recorded sample and compare; the container is always removed. With
    `auth`, the server gets a random key in TFTRAIN_SERVING_TOKEN (as the InferenceService's secret
    gives it) and must refuse a predict without it: a deploy never claims a key it does not enforce."""
    from runner.environments import docker_errors

    name = files.model.name
    auth = auth or bool(
        (files.scoring or {}).get("auth")
    )  # model.serving.auth: the image refuses to start without a key
    token = secrets.token_urlsafe(32) if auth else None
    if token:
        logger.mask(token)
    if resources.gpu:
        logger.info(
            f"serving_resources.gpu {resources.gpu}: the smoke test runs on CPU (the image holds CPU TensorFlow)"
        )
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
            logger.info(
                f"smoke test: the sample's predictions match the gate's (max |Δ| {difference:.2g})", style="green"
            )
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
    return urllib.request.urlopen(
        urllib.request.Request(url, body, headers, method="GET" if body is None else "POST"), timeout=timeout
    )


def _wait_ready(container, url: str, timeout: float, token: str | None = None) -> None:
    """The server in `container` answers 200 at `url`, or DeployError with its last line."""
    import urllib.error

    def ready() -> bool:
        try:
            with _request(url, None, token, 5) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):  # not listening yet: the port opens once the model is loaded
            return False

    def ended() -> bool:
        container.reload()
        return container.status in ("exited", "dead")

    outcome = wait_ready(ready, ended, timeout, every=0.5)
    if outcome is Waited.ENDED:
        code = container.attrs.get("State", {}).get("ExitCode")
        raise DeployError(f"smoke test: the server exited with {code} before it was ready: {_last_line(container)}")
    if outcome is Waited.TIMED_OUT:
        raise DeployError(f"smoke test: the server was not ready within {timeout:.0f}s: {_last_line(container)}")


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
        raise DeployError(
            f"smoke test: a predict without the key was answered {status}, not 401: the image does not enforce"
            f" {TOKEN_VARIABLE}"
        )


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
        raise DeployError(
            f"smoke test: predict answered {exc.code}: {exc.read().decode(errors='replace').strip()[:300]}"
        ) from None
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
            raise DeployError(
                f"smoke test: output {key!r} differs from the gate's predictions by {worst:.3g} (tolerance {TOLERANCE})"
            )
    return worst
