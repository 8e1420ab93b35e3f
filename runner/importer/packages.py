"""Package lists and environment files, from either SDK: what tftrain installs, and what it drops."""

from __future__ import annotations

import re
from typing import Any

from runner.targets.local.environment import FRAMEWORK_PACKAGES
from runner.importer.draft import TODO, Draft

AZUREML_PACKAGE = re.compile(r"^azureml([-_.]|$)", re.IGNORECASE)
VERSION_PIN = re.compile(r"==?\s*(\d+\.\d+(?:\.\d+)?)")
CONDA_HINT = "the local target has no conda: use_docker: true with a conda image (custom_docker_image), or pip_packages"


def add_packages(draft: Draft, key: str, packages: list[Any], where: str, unresolved: tuple[str, ...] = ()) -> None:
    """Append to pip_packages / conda_packages, minus the Azure ML SDK and TensorFlow itself."""
    kept = []
    for package in packages:
        text = str(package).strip()
        name = re.split(r"[=<>!~\[ ;]", text, maxsplit=1)[0].lower().replace("_", "-")
        if AZUREML_PACKAGE.match(name):
            draft.note(
                "dropped", f"{key}: {text!r}: compat: azureml routes Run.get_context()/run.log into tftrain", where
            )
        elif key == "conda_packages" and name in ("python", "pip"):
            draft.note("dropped", f"conda_packages: {text!r}: tftrain's environments use its own Python and pip", where)
        elif name in FRAMEWORK_PACKAGES:
            pin = VERSION_PIN.search(text)
            if pin and draft.get("framework_version") is None:
                draft.put("framework_version", pin[1])
            if name == "tensorflow-gpu" and not draft.get("use_gpu"):
                draft.put("use_gpu", True)
            draft.note("changed", f"{key}: {text!r} → framework_version/use_gpu (tftrain installs TensorFlow)", where)
        elif text and text not in kept:
            kept.append(text)
    entry = draft.entry(key)
    existing = entry.value if entry and isinstance(entry.value, list) else []
    merged = existing + [package for package in kept if package not in existing]
    comments = [entry.comment] if entry and entry.comment else []
    if unresolved:
        comments.append(f"{TODO}: {', '.join(unresolved)} at {where}")
        draft.note("todo", f"{key}: not resolved statically: {', '.join(unresolved)}", where)
    if key == "conda_packages" and merged and not any(CONDA_HINT in c for c in comments):
        comments.append(f"{TODO}: {CONDA_HINT}")
        draft.note("todo", f"conda_packages: {CONDA_HINT}", where)
    if merged or comments:
        draft.put(key, merged, "; ".join(comments), disabled=not merged)


def conda_file_packages(draft: Draft, spec: dict, where: str) -> None:
    """An inline conda specification (v2 `environment.conda_file` as a mapping)."""
    conda, pip = [], []
    for dependency in spec.get("dependencies") or []:
        if isinstance(dependency, dict):
            pip += [str(p) for p in dependency.get("pip") or []]
        elif isinstance(dependency, str):
            conda.append(dependency)
    if spec.get("channels"):
        draft.note(
            "dropped", f"conda channels {spec['channels']}: tftrain's conda_packages use the image's channels", where
        )
    add_packages(draft, "pip_packages", pip, where)
    add_packages(draft, "conda_packages", conda, where)


def environment_file(ctx, key: str, path: Any, where: str, base=None) -> None:
    """A requirements or conda file, given relative to `base` (default: the script's directory):
    tftrain wants it relative to source_directory, and there."""
    if not isinstance(path, str):
        ctx.draft.unresolved(key, ctx.shown(path), where)
        return
    found = ((base or ctx.input_dir) / path).resolve()
    source_dir = ctx.source_dir()
    if source_dir is not None and found.is_file() and found.is_relative_to(source_dir):
        relative = found.relative_to(source_dir).as_posix()
        if "conda" in key:
            ctx.draft.todo(key, CONDA_HINT, placeholder=relative, where=where)
        else:
            ctx.draft.put(key, relative)
        return
    why = "not found" if not found.is_file() else "outside source_directory"
    ctx.draft.todo(key, f"{path!r} ({why}): copy it into source_directory and give its path there", where=where)
