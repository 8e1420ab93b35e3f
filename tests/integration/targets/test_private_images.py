"""image_registry and user_managed on the docker target, against a registry that asks for a
password (tests/registries.py): logged in before the pull, each failure one line before anything
runs, the password in no file of the run and no line it printed."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest
import registries
from conftest import BASE_IMAGE, GATE_OFF
from watching import leftover_containers

pytestmark = pytest.mark.integration
auth_registry = registries.auth_registry

STANDIN = "tftrain-test/python-standin:latest"
# Python and a stand-in `tensorflow` module (a user-managed image holds TensorFlow; this one only
# has to answer the import check), and a python that cannot see it (-S: no site-packages).
STANDIN_DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \\
    && rm -rf /var/lib/apt/lists/*
RUN site=$(python3 -c 'import site; print(site.getsitepackages()[0])') && mkdir -p "$site/tensorflow" \\
    && echo '__version__ = "2.18.0"' > "$site/tensorflow/__init__.py" \\
    && printf '#!/bin/sh\\nexec python3 -S "$@"\\n' > /usr/local/bin/python-without-site && chmod +x /usr/local/bin/python-without-site
"""


@pytest.fixture(scope="session")
def standin(docker_client) -> str:
    try:
        docker_client.images.get(STANDIN)
    except Exception:  # docker.errors.ImageNotFound: built once, kept like the pool's host image
        docker_client.images.build(
            fileobj=io.BytesIO(STANDIN_DOCKERFILE.encode()), tag=STANDIN, network_mode="host", rm=True
        )
    return STANDIN


@pytest.fixture(scope="session")
def private_image(docker_client, auth_registry, standin) -> str:
    """The stand-in, pushed to the registry and its local tag removed: a run has to pull it."""
    image = f"{auth_registry.address}/team/standin:1"
    docker_client.images.get(standin).tag(image)
    auth = {"username": auth_registry.username, "password": auth_registry.password}
    for chunk in docker_client.api.push(image, stream=True, decode=True, auth_config=auth):
        assert "error" not in chunk, chunk
    docker_client.images.remove(image)
    return image


def manifest(root: Path, image: str, address: str, extra: str = "") -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "train.py").write_text("import sys\nprint('trained with', sys.executable)\n")
    path = root / "tftrain.yml"
    path.write_text(
        "name: private\nsource_directory: src\nentry_script: train.py\n" + GATE_OFF
        + f"use_docker: true\ncustom_docker_image: {image}\nuser_managed: true\nsecrets: [REGISTRY_PASSWORD]\n"
        + f"image_registry: {{address: '{address}', username: trainer, password_secret: REGISTRY_PASSWORD}}\n" + extra
    )  # fmt: skip
    return path


def test_a_private_image_is_pulled_after_logging_in_and_runs_as_it_is(
    docker_client, cli, home, tmp_path, monkeypatch, auth_registry, private_image
):
    monkeypatch.setenv("REGISTRY_PASSWORD", auth_registry.password)
    result = cli("run", "-f", str(manifest(tmp_path, private_image, auth_registry.address)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert f"pulling base image {private_image}" in result.stdout
    assert f"image {private_image} as it is (user_managed, python3, TensorFlow 2.18.0)" in result.stdout
    assert "building image" not in result.stdout
    run_dir = home / "runs" / "private-1"
    assert "trained with /usr/bin/python3" in (run_dir / "workdir/logs/0.log").read_text()
    assert auth_registry.password not in result.stdout + result.stderr
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert auth_registry.password.encode() not in path.read_bytes(), path
    plan = cli("plan", "-f", str(tmp_path / "tftrain.yml"))
    assert plan.returncode == 0 and auth_registry.password not in plan.stdout + plan.stderr
    assert leftover_containers(docker_client, "private-1") == []


def one_line_failure(cli, path: Path, code: int, said: str, password: str = "") -> str:
    result = cli("run", "-f", str(path))
    assert result.returncode == code, result.stdout[-2000:] + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and said in errors[0], result.stderr
    assert not password or password not in result.stdout + result.stderr
    return errors[0]


def test_a_wrong_password_is_one_line(docker_client, cli, home, tmp_path, monkeypatch, auth_registry, private_image):
    monkeypatch.setenv("REGISTRY_PASSWORD", "not-the-password")
    line = one_line_failure(
        cli, manifest(tmp_path, private_image, auth_registry.address), 9,
        f"image_registry: logging in to {auth_registry.address} as trainer failed: the registry refused the username or password",
        "not-the-password",
    )  # fmt: skip
    assert "trained with" not in line


def test_an_unknown_image_is_one_line(docker_client, cli, home, tmp_path, monkeypatch, auth_registry, private_image):
    monkeypatch.setenv("REGISTRY_PASSWORD", auth_registry.password)
    missing = f"{auth_registry.address}/team/missing:1"
    one_line_failure(
        cli,
        manifest(tmp_path, missing, auth_registry.address),
        9,
        f"base image {missing} is not on this machine and cannot be pulled",
        auth_registry.password,
    )


def test_a_registry_that_is_down_is_one_line(docker_client, cli, home, tmp_path, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("REGISTRY_PASSWORD", "whatever-it-is")
    address = f"localhost:{port}"
    one_line_failure(
        cli,
        manifest(tmp_path, f"{address}/team/standin:1", address),
        9,
        f"image_registry: logging in to {address} as trainer",
        "whatever-it-is",
    )


def test_a_user_managed_image_without_tensorflow_or_python_is_one_line(docker_client, cli, home, tmp_path, standin):
    path = tmp_path / "tftrain.yml"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('never')\n")
    base = "name: mine\nsource_directory: src\nentry_script: train.py\nuse_docker: true\nuser_managed: true\n"
    path.write_text(base + f"custom_docker_image: {standin}\npython: python-without-site\n")
    one_line_failure(
        cli,
        path,
        4,
        f"user_managed: python-without-site in image {standin} cannot import tensorflow (ModuleNotFoundError: No module"
        " named 'tensorflow')",
    )
    path.write_text(base + f"custom_docker_image: {BASE_IMAGE}\n")
    one_line_failure(cli, path, 4, f"python: python3 in image {BASE_IMAGE} cannot be started")
