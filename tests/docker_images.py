"""Removing the Docker images a test module built (tests/conftest.py's leaves_no_images)."""

from __future__ import annotations

from pathlib import Path

SOCKET = Path("/var/run/docker.sock")
# small images (an sshd, a stand-in) that several modules build once and share: kept
SHARED = {"tftrain-test/host:latest", "tftrain-test/python-standin:latest"}


def client_or_none():
    """A client when a daemon answers within a few seconds; None otherwise (nothing to clean)."""
    if not SOCKET.exists():
        return None
    import docker

    try:
        client = docker.DockerClient(base_url=f"unix://{SOCKET}", timeout=10)
        client.ping()
        return client
    except docker.errors.DockerException:
        return None


def ids(client) -> set[str]:
    """Every image and container there is (an image a container of the module still uses cannot go)."""
    if client is None:
        return set()
    return {image.id for image in client.images.list(all=True)} | {c.id for c in client.containers.list(all=True)}


def remove_new(client, before: set[str]) -> None:
    if client is None:
        return
    import docker

    for container in client.containers.list(all=True):
        if container.id not in before:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                continue
    shared = {image.id for image in client.images.list() if SHARED & set(image.tags)}
    for image in {image.id for image in client.images.list(all=True)} - before - shared:
        try:
            client.images.remove(image, force=True)
        except docker.errors.APIError:
            continue  # a child removed with its parent already, or an image in use: not this test's concern
    try:
        client.images.prune(filters={"dangling": True})
    except docker.errors.APIError:
        pass
