"""The targets by name. A backend is imported only when a run asks for it: `tftrain --version`
and a local run never load the docker or Kubernetes clients."""

from __future__ import annotations

from runner.errors import UnsupportedError
from runner.targets.base import Target

NAMES = ("local", "docker", "kubernetes", "pool")


def target_for(name: str) -> Target:
    """A fresh target for one run: what it reserves lives as long as the run."""
    if name == "local":
        from runner.targets.local.target import LocalTarget

        return LocalTarget()
    if name == "docker":
        from runner.targets.docker.target import DockerTarget

        return DockerTarget()
    if name == "kubernetes":
        from runner.targets.kubernetes.target import KubernetesTarget

        return KubernetesTarget()
    if name == "pool":
        from runner.targets.pool.target import PoolTarget

        return PoolTarget()
    raise UnsupportedError(f"compute.target: {name!r} is not available in this version of tftrain")
