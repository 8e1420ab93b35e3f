"""The runner pool's inventory: `.github/tftrain-pool.yml`, committed in the repo.

Hosts by name, how to reach them (ssh, docker endpoint) and what they hold (GPUs, CPU slots,
labels). Keys and passwords never live in the file: a host names the environment variable (a
GitHub secret) that holds its private key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import ManifestError
from runner.manifest.cost import CostSpec
from runner.manifest.fields import empty_list
from runner.manifest.loading import load_yaml
from runner.manifest.validate import format_loc, validation_messages

DEFAULT_POOL_FILE = ".github/tftrain-pool.yml"
SECRET_KEYS = {"key", "ssh_key", "private_key", "identity", "identity_file", "password", "passphrase", "ssh_password"}
PEM_MARKER = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|PuTTY-User-Key-File")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Host(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
    address: str = Field(description="IP or DNS name the other hosts and tftrain reach it at")
    ssh_user: str = "root"
    ssh_port: int = Field(default=22, ge=1, le=65535)
    identity_env: str = Field(
        default="TFTRAIN_SSH_KEY",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable (a secret) holding the private key; unset: ssh's own keys and agent",
    )
    docker: str | None = Field(
        default=None,
        description=(
            "Docker endpoint: unix:///var/run/docker.sock, tcp://…, or ssh://user@host[:port] (default: ssh to the"
            " host)"
        ),
    )
    network: str = Field(
        default="host",
        pattern=r"^(host|container:[A-Za-z0-9_.-]+)$",
        description=(
            "The tasks' network: host, or container:NAME (a host whose network lives in a container, as in test rigs)"
        ),
    )
    gpus: int = Field(default=0, ge=0, description="GPUs tftrain may give to jobs")
    gpu_type: str | None = None
    cpu_slots: int = Field(default=1, ge=1, description="CPU tasks (parameter servers, CPU ranks) it may run at once")
    labels: list[str] = Field(default_factory=empty_list)

    @property
    def docker_endpoint(self) -> str:
        return self.docker or f"ssh://{self.ssh_user}@{self.address}:{self.ssh_port}"


class Pool(_Model):
    """A pool file."""

    hosts: list[Host] = Field(min_length=1)
    state_dir: str | None = Field(
        default=None,
        description=(
            "Where leases live (default: ~/.local/state/tftrain/pool); share it between tftrain processes dispatching"
            " to this pool"
        ),
    )
    lease_ttl_seconds: float = Field(
        default=60.0, ge=5, description="A lease its holder stops renewing expires after this"
    )
    cost: CostSpec | None = Field(
        default=None, description="Prices of this pool's GPUs and CPUs per hour: runs on it record their cost"
    )

    def host(self, name: str) -> Host:
        return next(host for host in self.hosts if host.name == name)


@dataclass(frozen=True)
class LoadedPool:
    pool: Pool
    path: Path

    @property
    def state_dir(self) -> Path:
        if self.pool.state_dir:
            return Path(self.pool.state_dir).expanduser()
        return Path.home() / ".local" / "state" / "tftrain" / "pool"


def load_pool(path: Path | str) -> LoadedPool:
    path = Path(path)
    if not path.is_file():
        raise ManifestError(
            f"{path}: pool file not found (compute.pool_file names it; `tftrain pool` also takes --pool)"
        )
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise ManifestError(f"{doc.where(())}: the pool file must be a mapping with a `hosts:` list")
    secret = _inline_secret(doc.data, ())
    if secret is not None:
        raise ManifestError(
            f"{doc.where(secret)}: {format_loc(secret)}: keys and passwords never go in the pool file; "
            "put the private key in a secret and name its variable with identity_env"
        )
    try:
        pool = Pool.model_validate(doc.data)
    except ValidationError as exc:
        raise ManifestError("\n".join(validation_messages(exc, doc, Pool))) from None
    duplicate = _duplicate_name(pool)
    if duplicate is not None:
        raise ManifestError(
            f"{doc.where(('hosts', duplicate, 'name'))}: hosts[{duplicate}].name: duplicate host name"
            f" {pool.hosts[duplicate].name!r}"
        )
    return LoadedPool(pool, path.resolve())


def _duplicate_name(pool: Pool) -> int | None:
    """The index of the first host whose name an earlier host has."""
    seen: set[str] = set()
    for index, host in enumerate(pool.hosts):
        if host.name in seen:
            return index
        seen.add(host.name)
    return None


def _inline_secret(node: Any, loc: tuple) -> tuple | None:
    """Where the file holds a key or password: a key named like one, or a PEM block anywhere."""
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key).lower() in SECRET_KEYS:
                return (*loc, key)
            found = _inline_secret(value, (*loc, key))
            if found is not None:
                return found
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found = _inline_secret(value, (*loc, index))
            if found is not None:
                return found
    elif isinstance(node, str) and PEM_MARKER.search(node):
        return loc
    return None


def pool_schema() -> str:
    schema = Pool.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tftrain runner pool (.github/tftrain-pool.yml)"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
