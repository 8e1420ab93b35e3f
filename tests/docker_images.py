"""Removing the Docker images the suite built (tests/conftest.py's leaves_no_images).

Each TensorFlow image holds ~2 GB, and a cold CI machine's disk once filled with them; but a module
that builds the image an earlier module built (the same TensorFlow layer, Horovod compiled against
it) pays minutes again when that image is gone. So a module's containers go after it, its images
stay while the disk has room (FLOOR free), and go all together when it has not, and at the end."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SOCKET = Path("/var/run/docker.sock")
# small images (an sshd, a stand-in) that several modules build once and share: kept
SHARED = {"tftrain-test/host:latest", "tftrain-test/python-standin:latest"}
# the costliest to build (Horovod compiles for ~3 min): shared by plan/test_distributed and
# targets/test_pool_hosts, so the last to go when room is needed
PRECIOUS = ("tftrain/horovod-keras:",)
FLOOR = int(os.environ.get("TFTRAIN_TEST_IMAGE_FLOOR_GB", "20")) * 2**30


def client_or_none():
    """A client when a daemon answers within a few seconds; None otherwise (nothing to clean)."""
    if not SOCKET.exists():
        return None
    import docker

    try:
        client = docker.DockerClient(base_url=f"unix://{SOCKET}", timeout=120)  # removing a large image takes long
        client.ping()
        return client
    except docker.errors.DockerException:
        return None


def ids(client) -> set[str]:
    """Every image and container there is (an image a container of the module still uses cannot go)."""
    if client is None:
        return set()
    return {image.id for image in client.images.list(all=True)} | {c.id for c in client.containers.list(all=True)}


def room(client) -> bool:
    """Whether the disk Docker keeps its images on has FLOOR free."""
    root = Path(client.info().get("DockerRootDir") or "/var/lib/docker")
    return shutil.disk_usage(root if root.exists() else "/").free >= FLOOR


def remove_containers(client, before: set[str]) -> None:
    if client is None:
        return
    import docker

    for container in client.containers.list(all=True):
        if container.id not in before:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                continue


def remove_images(client, before: set[str], keep_precious: bool = False) -> None:
    """Every image new since `before` but the SHARED ones (and the PRECIOUS ones when asked)."""
    if client is None:
        return
    import docker

    images = client.images.list(all=True)
    spared = {image.id for image in images if SHARED & set(image.tags)}
    if keep_precious:
        spared |= {image.id for image in images if any(tag.startswith(PRECIOUS) for tag in image.tags)}
    for image in {image.id for image in images} - before - spared:
        try:
            client.images.remove(image, force=True)
        except docker.errors.APIError:
            continue  # a child removed with its parent already, or an image in use: not this test's concern
    try:
        client.images.prune(filters={"dangling": True})
    except docker.errors.APIError:
        pass


def make_room(client, before: set[str]) -> None:
    """After a module: when the disk is short of FLOOR, the session's images go, Horovod's last."""
    if client is None or room(client):
        return
    remove_images(client, before, keep_precious=True)
    if not room(client):
        remove_images(client, before)
