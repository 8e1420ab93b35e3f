"""The serving environment, on tftrain's side: a cached virtualenv holding KServe, the model's
TensorFlow release (CPU) and, for model.onnx, ONNX Runtime — built once by the same builder local
runs use, keyed by what goes into it — and the variables the model server starts with."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import runner
from runner.environments.virtualenv import EnvSpec, PythonEnv, prepare_env
from runner.frameworks.serving import (
    framework_constraints,
    scoring_requirements,
    serving_constraints,
    serving_requirements,
)
from runner.paths import cache_dir
from runner.telemetry.logger import Logger


def serving_spec(framework_version: str | None, onnx: bool) -> EnvSpec:
    # "serving" in the key: never the same directory as a training environment of the same packages
    return _keyed(serving_requirements(framework_version, onnx=onnx), serving_constraints(framework_version), "serving")


def scoring_spec(framework_version: str | None, packages: tuple[str, ...]) -> EnvSpec:
    """A scoring script's environment: TensorFlow's tested set + azmlinfsrv + the script's packages."""
    return _keyed(
        scoring_requirements(framework_version, packages), framework_constraints(framework_version), "scoring"
    )


def _keyed(requirements: tuple[str, ...], constraints: str | None, purpose: str) -> EnvSpec:
    python = ".".join(map(str, sys.version_info[:3]))
    key = {"python": python, "requirements": requirements, "purpose": purpose}
    if constraints is not None:
        key["constraints"] = constraints
    source = json.dumps(key, sort_keys=True)
    return EnvSpec(
        python, requirements, None, None, hashlib.sha256(source.encode()).hexdigest(), constraints=constraints
    )


def prepare_serving_env(spec: EnvSpec, logger: Logger) -> PythonEnv:
    """The environment, built on first use (minutes: TensorFlow and KServe) and reused after;
    PreparingError naming pip's failing line when the build fails."""
    assert spec.key is not None
    log_path = cache_dir() / "envs" / f"{spec.key}.build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return prepare_env(spec, Path.cwd(), logger, log_path, console=False)


def link_runner(directory: Path) -> Path:
    """A directory to put on PYTHONPATH that holds `runner` (a link to this package): the
    environment has no tftrain installed, the server runs from tftrain's own source."""
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / "runner"
    if not link.exists():
        link.symlink_to(Path(runner.__file__).parent, target_is_directory=True)
    return directory


def server_env(pythonpath: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(pythonpath),
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),  # oneDNN and device lines are noise here
    }
