"""Environments: the Python a training, the model gate, an export or a server runs in, built here.

The rooms: virtualenv.py (a cached virtualenv keyed by everything in it, built once under a lock),
serving.py (the model server's virtualenv and variables),
user_managed.py (an interpreter or image tftrain did not build: does TensorFlow import there?),
images.py (the training image's Dockerfile and content tag), image_build.py (pull, build, push),
daemon.py (reaching the Docker daemon, a private registry's login), training_image.py (the
steps every container target takes on a daemon), refresh.py and smoke.py (scripts/refresh-frameworks
remakes TensorFlow's tested sets, which live in runner/frameworks/).

The API is the names below, importable from `runner.environments`: targets, serving, the gate,
export and the importer ask for an environment here and never reach into a backend for one. Each
name is loaded with its room when first asked for, so importing the wing costs nothing (a
manifest's checks read the curated sets without loading the docker SDK's helpers). Modules inside
the wing import each other by their own names, never this package's.
"""

from __future__ import annotations

import importlib

_API = {
    # what a target prepared, for the gate and the lineage
    "Environment": "prepared",
    "Probe": "prepared",
    # virtualenvs on this machine
    "EnvSpec": "virtualenv",
    "PythonEnv": "virtualenv",
    "FRAMEWORK_PACKAGES": "virtualenv",
    "env_spec": "virtualenv",
    "current_interpreter": "virtualenv",
    "requirements_spec": "virtualenv",
    "prepare_env": "virtualenv",
    "packages_in": "virtualenv",
    "framework_version_of": "virtualenv",
    # the model server's environment (tftrain serve, the gate's server check)
    "serving_spec": "serving",
    "scoring_spec": "serving",
    "prepare_serving_env": "serving",
    "link_runner": "serving",
    "server_env": "serving",
    # environments tftrain did not build
    "check_interpreter": "user_managed",
    "require_tf_keras": "user_managed",
    "tf_keras_in": "user_managed",
    "image_python": "user_managed",
    # images
    "ImageSpec": "images",
    "image_spec": "images",
    "base_image_for": "images",
    "host_ca_bundle": "images",
    "CA_NAME": "images",
    "CONSTRAINTS_NAME": "images",
    "LABEL": "images",
    "VENV_PYTHON": "images",
    "docker_client": "daemon",
    "docker_errors": "daemon",
    "registry_auth": "daemon",
    "log_in": "daemon",
    "base_image_id": "image_build",
    "existing_image": "image_build",
    "build_image": "image_build",
    "build_code_image": "image_build",
    "push_image": "image_build",
    "trees_digest": "image_build",
    "DaemonImage": "training_image",
    "prepare_image": "training_image",
    "planned_image": "training_image",
    "push_code_image": "training_image",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    """`from runner.environments import prepare_env`: the name, from its room, loaded now."""
    room = _API.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{room}"), name)
    globals()[name] = value  # asked once: later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
