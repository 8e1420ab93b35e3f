"""What each pool host can do right now: ssh, docker, the NVIDIA runtime and driver, its GPUs.

Hosts are probed in parallel; one unreachable host costs its connect timeout, not the sum.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from runner.errors import HostError
from runner.targets.pool.inventory import Host
from runner.targets.pool.ssh import DockerEndpoint, Ssh, ssh_failure

NVIDIA_QUERY = "nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv,noheader,nounits"
# The oldest Linux driver that runs a CUDA major version (minor-version compatibility).
MIN_DRIVER = {12: (525, 60, 13), 11: (450, 80, 2)}


@dataclass(frozen=True)
class HostStatus:
    host: Host
    ssh: str | None = None  # None: fine; else the problem
    docker: str | None = None
    docker_version: str | None = None
    nvidia_runtime: bool = False
    driver: str | None = None
    gpus_seen: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()  # run ids of tftrain containers on it

    def problem(self, needs_gpu: bool, cuda_major: int | None = None) -> str | None:
        """Why a job cannot use the host, or None."""
        name = f"host {self.host.name} ({self.host.address})"
        if self.ssh:
            return f"{name}: unreachable over ssh: {self.ssh}"
        if self.docker:
            return f"{name}: no docker: {self.docker}"
        if needs_gpu and not self.nvidia_runtime:
            return f"{name}: docker has no NVIDIA runtime (install nvidia-container-toolkit and restart dockerd)"
        if needs_gpu and cuda_major in MIN_DRIVER:
            if self.driver is None:
                return f"{name}: nvidia-smi does not answer, so no GPU driver can be confirmed"
            if _version(self.driver) < MIN_DRIVER[cuda_major]:
                least = ".".join(map(str, MIN_DRIVER[cuda_major]))
                return (
                    f"{name}: NVIDIA driver {self.driver} is too old for CUDA {cuda_major} (the image's); {least} or"
                    " newer is needed"
                )
        return None


def probe(host: Host, state_dir: Path) -> HostStatus:
    ssh = Ssh.to(host, state_dir)
    result = ssh.run("true")
    if result.returncode != 0:
        return HostStatus(host, ssh=ssh_failure(result))
    driver, gpus = _nvidia(ssh)
    endpoint = DockerEndpoint(host, state_dir)
    try:
        client = endpoint.connect()
        info = client.info()
        runs = {c.labels.get("tftrain.run-id", "") for c in client.containers.list(filters={"label": "tftrain.run-id"})}
    except HostError as exc:
        return HostStatus(host, docker=str(exc).split(": ", 1)[-1], driver=driver, gpus_seen=gpus)
    finally:
        endpoint.close()
    runtimes = info.get("Runtimes") or {}
    nvidia = "nvidia" in runtimes or info.get("DefaultRuntime") == "nvidia"
    return HostStatus(host, None, None, info.get("ServerVersion"), nvidia, driver, gpus, tuple(sorted(runs)))


def probe_all(hosts: list[Host], state_dir: Path) -> list[HostStatus]:
    if not hosts:
        return []
    with ThreadPoolExecutor(min(16, len(hosts))) as workers:
        return list(workers.map(lambda host: probe(host, state_dir), hosts))


def _nvidia(ssh: Ssh) -> tuple[str | None, tuple[str, ...]]:
    result = ssh.run(NVIDIA_QUERY)
    if result.returncode != 0:
        return None, ()
    rows = [[part.strip() for part in line.split(",")] for line in result.stdout.splitlines() if line.strip()]
    driver = rows[0][2] if rows and len(rows[0]) > 2 else None
    return driver, tuple(f"{row[0]}: {row[1]}" for row in rows if len(row) > 1)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def cuda_major(framework_version: str | None) -> int | None:
    """The CUDA major version of TensorFlow's GPU build: 12 from TF 2.15, 11 before."""
    if not framework_version:
        return 12
    major, minor = (int(part) for part in framework_version.split(".")[:2])
    return 12 if (major, minor) >= (2, 15) else 11


def preflight(hosts: list[Host], state_dir: Path, manifest=None) -> list[tuple[HostStatus, str | None]]:
    """Every host probed, with why a job of `manifest` cannot use it (None: it can). Without a
    manifest, only reachability counts (ssh, docker)."""
    needs_gpu = bool(manifest is not None and manifest.use_gpu)
    cuda = cuda_major(manifest.framework_version) if needs_gpu else None
    return [(status, status.problem(needs_gpu, cuda)) for status in probe_all(hosts, state_dir)]
