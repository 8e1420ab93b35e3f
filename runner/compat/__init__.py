"""Compatibility layers for scripts written for another platform: Azure ML's Run API.

The start-up layer (runner/compat/startup) goes first on the same path where a run needs it: an
`evaluation:` with TFTRAIN_SEED set, unless `evaluation.set_seed: false` (Python's, NumPy's and the
frameworks' seeds are set before the script's first line), and a target that stops trainings to
resume them (Keras' saves finish before a SIGTERM takes effect).

The azureml layer is a small `azureml` package (runner/compat/shims) put first on the
training's PYTHONPATH — in a virtualenv, an image or the current interpreter alike, for every
rank — when the manifest says `compat: azureml`, or when the entry script imports azureml
and the real SDK is not in the environment. `compat: none` keeps it off.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

SHIMS = "runner/compat/shims"  # below the directory on PYTHONPATH that holds `runner`
STARTUP = "runner/compat/startup"  # its sitecustomize: seeds (TFTRAIN_SEED), saves before a stop
SAVE_BEFORE_STOP = "TFTRAIN_SAVE_BEFORE_STOP"
SDK_PACKAGES = {"azureml-core", "azureml-sdk", "azureml-defaults", "azureml-train-core", "azureml-mlflow"}
PROBE = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('azureml') and u.find_spec('azureml.core') else 1)"


def azureml_reason(loaded, python: str | None) -> str | None:
    """Why the azureml layer goes into the training environment, or None. `python` is the
    environment's interpreter when tftrain can run it here (local target)."""
    manifest = loaded.manifest
    if manifest.compat == "azureml":
        return "compat: azureml"
    if manifest.compat == "none" or not imports_azureml(loaded.source_dir / manifest.entry_script):
        return None
    if declares_sdk(loaded) or (python is not None and _has_sdk(python)):
        return None
    return f"{manifest.entry_script} imports azureml and the Azure ML SDK is not installed"


def imports_azureml(script: Path) -> bool:
    try:
        source = script.read_bytes()
        if b"azureml" not in source:  # most scripts: no parse (of a long script) before it starts
            return False
        import ast

        tree = ast.parse(source, filename=str(script))
    except (OSError, SyntaxError, ValueError):
        return False  # the run reports a script it cannot read or parse
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "azureml" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "azureml":
            return True
    return False


def declares_sdk(loaded) -> bool:
    manifest = loaded.manifest
    requirements = list(manifest.pip_packages) + list(manifest.conda_packages)
    for key in ("pip_requirements_file", "conda_dependencies_file"):
        name = getattr(manifest, key)
        if name and (loaded.source_dir / name).is_file():
            requirements += (loaded.source_dir / name).read_text(errors="replace").splitlines()
    names = {
        re.split(r"[\s<>=!~\[;@]", line.strip().lstrip("- "), maxsplit=1)[0].lower().replace("_", "-")
        for line in requirements
    }
    return bool(names & SDK_PACKAGES)


def _has_sdk(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", PROBE], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def azureml_env(loaded, runtime, pythonpath: str | None) -> dict[str, str]:
    """The variables that put the layer first on the path and tell it the run's names."""
    shims = f"{runtime.pythonpath}/{SHIMS}"
    return {
        "PYTHONPATH": f"{shims}:{pythonpath}" if pythonpath else f"{shims}:{runtime.pythonpath}",
        "TFTRAIN_EXPERIMENT": loaded.manifest.name,
        "TFTRAIN_INPUTS": json.dumps(dict(runtime.inputs), sort_keys=True),
    }


def startup_env(loaded, runtime, pythonpath: str | None, save_before_stop: bool) -> dict[str, str]:
    """The start-up layer first on the training's PYTHONPATH where the run needs it: one of an
    evaluation's seeds whose manifest lets tftrain set the frameworks' seeds, or a target that stops
    the training to resume it (`save_before_stop`: Target.stops_to_resume); else nothing."""
    from runner.manifest.evaluation import SEED_VARIABLE

    manifest = loaded.manifest
    seeding = (
        manifest.evaluation is not None
        and manifest.evaluation.set_seed
        and SEED_VARIABLE in manifest.environment_variables
    )
    if not (seeding or save_before_stop):
        return {}
    layer = f"{runtime.pythonpath}/{STARTUP}"
    variables = {"PYTHONPATH": f"{layer}:{pythonpath}" if pythonpath else f"{layer}:{runtime.pythonpath}"}
    if save_before_stop:
        variables[SAVE_BEFORE_STOP] = "1"
    return variables
