"""image_registry on a cluster: the pods pull through an image pull secret (a Secret of type
kubernetes.io/dockerconfigjson) that tftrain applies before the job. The job document names the
registry, user and the variable holding the password in annotations, never the password itself:
the document is kept with the run and can be printed (`tftrain plan`)."""

from __future__ import annotations

import base64
import json

from runner.manifest.model import Manifest

SECRET_TYPE = "kubernetes.io/dockerconfigjson"
HOST = "tftrain/image-registry"
USER = "tftrain/image-registry-username"
PASSWORD_VARIABLE = "tftrain/image-registry-password-secret"


def pull_secret_name(model: str) -> str:
    return f"{model}-registry"


def annotations(manifest: Manifest) -> dict[str, str]:
    registry = manifest.image_registry
    if registry is None:
        return {}
    return {HOST: registry.host, USER: registry.username, PASSWORD_VARIABLE: registry.password_secret}


def pull_secrets(manifest: Manifest) -> list[dict[str, str]]:
    """What a pod spec's imagePullSecrets lists."""
    return [{"name": pull_secret_name(manifest.name)}] if manifest.image_registry is not None else []


def docker_config(host: str, username: str, password: str) -> dict[str, str]:
    """The Secret's stringData: the same JSON `docker login` writes to ~/.docker/config.json."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    config = {"auths": {host: {"username": username, "password": password, "auth": auth}}}
    return {".dockerconfigjson": json.dumps(config)}


def secret_for(document: dict, env: dict[str, str]) -> tuple[str, dict[str, str]] | None:
    """(name, stringData) of the pull secret a rendered job needs, the password taken from the run's
    secrets (`env`); None when the job pulls from public registries only."""
    notes = document["metadata"].get("annotations") or {}
    if HOST not in notes:
        return None
    password = env.get(notes[PASSWORD_VARIABLE], "")
    name = pull_secret_name(document["metadata"]["labels"]["tftrain/model"])
    return name, docker_config(notes[HOST], notes[USER], password)
