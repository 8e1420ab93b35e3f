"""Real hosts for the pool target's tests, built on this one machine.

A test host is a container on a user-defined docker network the test creates: its own IP and
hostname, and a real sshd (Debian's openssh-server) that accepts the rig's key. Its network
namespace is the host's network: the pool file says `network: container:NAME`, so the job's
containers join it (what `network: host` is on a real machine). Its docker endpoint is this
machine's daemon. `loopback_sshd` runs this machine's own sshd on 127.0.0.1, for docker over
`ssh://`. Traffic stays on loopback and on the networks the rig created.
"""

from __future__ import annotations

import io
import socket
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HOST_IMAGE = "tftrain-test/host:latest"
HOST_DOCKERFILE = """FROM {base}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server \\
    && rm -rf /var/lib/apt/lists/*
"""
SSHD = "mkdir -p /run/sshd && ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -D -e"


def key_pair(directory: Path) -> tuple[str, str]:
    key = directory / "rig_key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key.read_text(), (directory / "rig_key.pub").read_text()


def host_image(client, base: str) -> str:
    try:
        client.images.get(HOST_IMAGE)
    except Exception:
        context = io.BytesIO(HOST_DOCKERFILE.format(base=base).encode())
        client.images.build(fileobj=context, tag=HOST_IMAGE, network_mode="host", rm=True)
    return HOST_IMAGE


@dataclass
class Rig:
    client: object
    public_key: str
    private_key: str
    prefix: str = field(default_factory=lambda: f"tftrain-rig-{uuid.uuid4().hex[:6]}")
    hosts: list = field(default_factory=list)
    network: object = None

    def add_host(self, name: str, cpu_slots: int = 4, gpus: int = 0, labels: tuple[str, ...] = ()) -> dict:
        if self.network is None:
            self.network = self.client.networks.create(self.prefix, driver="bridge")
        container = self.client.containers.create(
            HOST_IMAGE,
            ["sh", "-c", SSHD],
            name=f"{self.prefix}-{name}",
            hostname=name,
            network=self.network.name,
            labels={"tftrain.test-rig": self.prefix},
            detach=True,
        )
        container.put_archive("/root", _ssh_dir(self.public_key))
        container.start()
        container.reload()
        address = container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
        _wait_for_port(address, 22)
        self.hosts.append(container)
        return {
            "name": name,
            "address": address,
            "ssh_port": 22,
            "docker": "unix:///var/run/docker.sock",
            "network": f"container:{container.name}",
            "gpus": gpus,
            "cpu_slots": cpu_slots,
            "labels": list(labels),
        }

    def container(self, name: str):
        return next(c for c in self.hosts if c.name == f"{self.prefix}-{name}")

    def write_pool(self, path: Path, hosts: list[dict], state_dir: Path, **extra) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"hosts": hosts, "state_dir": str(state_dir), **extra}, sort_keys=False))
        return path

    def close(self) -> None:
        for container in self.client.containers.list(all=True, filters={"label": f"tftrain.test-rig={self.prefix}"}):
            container.remove(force=True)
        if self.network is not None:
            self.network.remove()


def _ssh_dir(public_key: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        directory = tarfile.TarInfo(".ssh")
        directory.type, directory.mode = tarfile.DIRTYPE, 0o700
        archive.addfile(directory)
        data = public_key.encode()
        keys = tarfile.TarInfo(".ssh/authorized_keys")
        keys.size, keys.mode = len(data), 0o600
        archive.addfile(keys, io.BytesIO(data))
    return buffer.getvalue()


def _wait_for_port(address: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def loopback_sshd(directory: Path, public_key: str) -> tuple[subprocess.Popen, int]:
    """This machine's sshd on 127.0.0.1 with its own config and host key, trusting the rig's key."""
    directory.mkdir(parents=True, exist_ok=True)
    host_key = directory / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    (directory / "authorized_keys").write_text(public_key)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = directory / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nAuthorizedKeysFile {directory}/authorized_keys\n"
        f"PidFile {directory}/sshd.pid\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nStrictModes no\n"
        "AllowStreamLocalForwarding yes\nUsePAM no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)], stderr=subprocess.DEVNULL)
    _wait_for_port("127.0.0.1", port)
    return process, port
