"""The Docker daemon that builds and holds images: how tftrain reaches it (`docker_client`), how the
SDK's failures read (`docker_errors`), and a private registry (manifest `image_registry`).

tftrain logs in through the docker SDK before the image is pulled, on this machine's daemon or a
pool host's. The password comes from tftrain's environment (the `secrets:` entry
image_registry.password_secret names), is masked like every secret, and is handed to the daemon
only: never to a build, a container or the run record."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from runner.errors import DockerError, PreparingError, answered, one_line, unreachable
from runner.manifest.images import ImageRegistry
from runner.manifest.model import Manifest


def docker_client():
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerError(
            f"cannot reach the Docker daemon ({os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')}): {exc}"
        ) from None
    return client


@contextmanager
def docker_errors(what: str) -> Iterator[None]:
    """Turn what the docker SDK raises while doing `what` into a DockerError: one line naming the
    call and the daemon's answer."""
    import docker
    from requests import RequestException

    try:
        yield
    except docker.errors.APIError as exc:
        raise DockerError(answered("Docker", what, exc.status_code, exc.explanation)) from None
    except (docker.errors.DockerException, RequestException) as exc:
        raise DockerError(unreachable("Docker", what, exc)) from None


def registry_auth(manifest: Manifest) -> dict[str, str] | None:
    """The auth_config docker's pull takes, or None when the image is public."""
    registry = manifest.image_registry
    if registry is None:
        return None
    password = os.environ.get(registry.password_secret)
    if not password:
        raise PreparingError(
            f"image_registry.password_secret: {registry.password_secret} is not set in tftrain's environment"
        )
    return {"username": registry.username, "password": password, "serveraddress": registry.host}


def log_in(client, registry: ImageRegistry, auth: dict[str, str]) -> None:
    """Checks the credentials before anything is pulled or run: a wrong password or a registry that
    does not answer is one line here, not a pull error later."""
    import docker
    from requests import RequestException

    what = f"image_registry: logging in to {registry.host} as {registry.username}"
    try:
        client.login(auth["username"], auth["password"], registry=registry.host, reauth=True)
    except docker.errors.APIError as exc:
        answer = one_line(str(exc.explanation or exc))
        if exc.status_code == 401 or "unauthorized" in answer.lower():
            raise DockerError(f"{what} failed: the registry refused the username or password ({answer})") from None
        raise DockerError(f"{what} failed: {answer}") from None
    except (docker.errors.DockerException, RequestException) as exc:
        raise DockerError(unreachable("Docker", what, exc)) from None
