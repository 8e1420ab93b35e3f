"""A Docker registry that asks for a password: Debian's docker-registry with htpasswd auth, which
it serves only over TLS, on a self-signed certificate this fixture makes for `localhost`. dockerd
trusts it through /etc/docker/certs.d/localhost:PORT/ca.crt, removed again at the end.

A test module takes the fixture with `auth_registry = registries.auth_registry`."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import untag_pushed

CERTS_D = Path("/etc/docker/certs.d")


@dataclass(frozen=True)
class AuthRegistry:
    address: str  # localhost:PORT
    username: str
    password: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; run scripts/system-deps (Debian package {package})", pytrace=False)
    return found


def _make_files(root: Path, port: int, username: str, password: str) -> Path:
    subprocess.run(
        [
            _tool("openssl", "openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem"),
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    hashed = subprocess.run(
        [_tool("htpasswd", "apache2-utils"), "-Bbn", username, password], check=True, capture_output=True, text=True
    ).stdout
    (root / "htpasswd").write_text(hashed)
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {root / 'cert.pem'}\n    key: {root / 'key.pem'}\n"
        f"auth:\n  htpasswd:\n    realm: tftrain-test\n    path: {root / 'htpasswd'}\n"
    )
    return config


def _wait_ready(url: str, cert: Path, process: subprocess.Popen) -> None:
    context = ssl.create_default_context(cafile=str(cert))
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1, context=context)
            return
        except urllib.error.HTTPError as exc:  # 401: up, and asking for the password
            if exc.code == 401:
                return
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail("docker-registry (TLS, htpasswd) did not start", pytrace=False)
        time.sleep(0.1)


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory):
    binary = _tool("docker-registry", "docker-registry")
    root = tmp_path_factory.mktemp("auth-registry")
    port = _free_port()
    username, password = "trainer", "Reg1stry-pa55-" + root.name[-6:]
    config = _make_files(root, port, username, password)
    trust = CERTS_D / f"localhost:{port}"
    trust.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "cert.pem", trust / "ca.crt")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"https://localhost:{port}/v2/", root / "cert.pem", process)
        yield AuthRegistry(f"localhost:{port}", username, password)
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(trust, ignore_errors=True)
        untag_pushed(f"localhost:{port}/")
