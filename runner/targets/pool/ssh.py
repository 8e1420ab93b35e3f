"""Reaching pool hosts: OpenSSH commands with the host's key, and docker endpoints.

The private key comes from the environment variable the host names (a GitHub secret), is
written 0600 into a private temporary directory for this process, and removed at exit. Host
keys are trusted on first use and remembered in the pool's state directory
(`known_hosts`): a host whose key changes afterwards is refused by ssh.

`ssh://` docker endpoints are reached through an OpenSSH tunnel to the host's docker socket
(`ssh -L local.sock:/var/run/docker.sock`): the same key, options and known_hosts as every other
connection, and one connection for all the API calls of a run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from runner.errors import HostError
from runner.targets.pool.inventory import Host

CONNECT_TIMEOUT = 5
_private_dir: Path | None = None
# Hosts are probed and launched on in threads: one writes a key file, the others wait for it whole
_key_lock = threading.Lock()


def _private() -> Path:
    global _private_dir
    if _private_dir is None:
        _private_dir = Path(tempfile.mkdtemp(prefix="tftrain-ssh-"))
        atexit.register(shutil.rmtree, _private_dir, True)
    return _private_dir


def identity_file(host: Host) -> Path | None:
    """The host's key as a file ssh can read, or None (ssh's own keys and agent)."""
    text = os.environ.get(host.identity_env)
    if not text:
        return None
    with _key_lock:
        path = _private() / f"{host.identity_env}.key"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text.strip() + "\n")
    return path


@dataclass(frozen=True)
class Ssh:
    user: str
    address: str
    port: int
    identity: Path | None
    known_hosts: Path

    @classmethod
    def to(
        cls, host: Host, state_dir: Path, user: str | None = None, address: str | None = None, port: int | None = None
    ) -> Ssh:
        state_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            user or host.ssh_user,
            address or host.address,
            port or host.ssh_port,
            identity_file(host),
            state_dir / "known_hosts",
        )

    def options(self) -> list[str]:
        options = [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            "LogLevel=ERROR",
            "-p",
            str(self.port),
        ]
        if self.identity is not None:
            options += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        return options

    def command(self, *remote: str) -> list[str]:
        return ["ssh", *self.options(), f"{self.user}@{self.address}", "--", *remote]

    def run(self, remote: str, timeout: float = 20) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                self.command(remote), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess([], 255, "", f"ssh timed out after {timeout:.0f}s")


def ssh_failure(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"ssh exited with {result.returncode}"


class DockerEndpoint:
    """A docker client for a host's endpoint; for ssh:// through a tunnel held until close()."""

    def __init__(self, host: Host, state_dir: Path) -> None:
        self.host = host
        self.state_dir = state_dir
        self.tunnel: subprocess.Popen | None = None
        self.client = None

    def connect(self):
        import docker

        endpoint = self.host.docker_endpoint
        url = urlsplit(endpoint)
        base_url = endpoint
        if url.scheme == "ssh":
            base_url = self._open_tunnel(url)
        try:
            self.client = docker.DockerClient(base_url=base_url, timeout=120)
            self.client.ping()
        except Exception as exc:  # DockerException, requests errors
            self.close()
            raise HostError(f"host {self.host.name}: docker at {endpoint} does not answer: {exc}") from None
        return self.client

    def _open_tunnel(self, url) -> str:
        socket_path = Path(tempfile.mkdtemp(prefix="tftrain-docker-", dir=_private())) / "docker.sock"
        remote_socket = url.path if url.path not in ("", "/") else "/var/run/docker.sock"
        ssh = Ssh.to(self.host, self.state_dir, user=url.username, address=url.hostname, port=url.port or 22)
        argv = [
            "ssh",
            *ssh.options(),
            "-o",
            "ExitOnForwardFailure=yes",
            "-nNT",
            "-L",
            f"{socket_path}:{remote_socket}",
            f"{ssh.user}@{ssh.address}",
        ]
        self.tunnel = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + CONNECT_TIMEOUT + 5
        while not socket_path.exists():
            if self.tunnel.poll() is not None or time.monotonic() > deadline:
                error = (
                    self.tunnel.stderr.read().strip().splitlines() if self.tunnel.poll() is not None else ["timed out"]
                )
                self.close()
                raise HostError(
                    f"host {self.host.name}: cannot reach docker over ssh ({url.geturl()}):"
                    f" {error[-1] if error else 'ssh failed'}"
                )
            time.sleep(0.05)
        return f"unix://{socket_path}"

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.tunnel is not None:
            self.tunnel.terminate()
            try:
                self.tunnel.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.tunnel.kill()
            self.tunnel = None
