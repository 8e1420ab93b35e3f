"""Package lists and environment files, from either SDK: what tftrain installs, and what it drops."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from runner.environments import FRAMEWORK_PACKAGES
from runner.errors import ManifestError
from runner.importer.draft import TODO, Draft
from runner.manifest import yamlfile

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
    """A conda specification (v2 `environment.conda_file` as a mapping, a notebook's written file)."""
    conda, pip = [], []
    dependencies = spec.get("dependencies")
    for dependency in dependencies if isinstance(dependencies, list) else []:
        if isinstance(dependency, dict) and isinstance(dependency.get("pip"), list):
            pip += [str(p) for p in dependency["pip"] if isinstance(p, (str, int, float))]
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
    written = getattr(ctx, "written", {}).get(found)
    if written is not None:  # a notebook's %%writefile cell: what it writes is the file
        _from_written(ctx, key, written, where)
        return
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


def _from_written(ctx, key: str, written, where: str) -> None:
    """A requirements or conda file that the notebook writes (%%writefile): its packages, read
    as the file would be (YAML through the bounded reader), go into the manifest."""
    written.used = True
    origin = f"{written.name!r}, written by the notebook at {written.where}"
    if "conda" not in key:
        lines = [line.split("#")[0].strip() for line in written.content.splitlines()]
        add_packages(ctx.draft, "pip_packages", [line for line in lines if line and not line.startswith("-")], where)
        ctx.draft.note("changed", f"{key}: {origin} → pip_packages", where)
        return
    try:
        spec = yamlfile.parse(Path(written.where), written.content).data
    except ManifestError as exc:
        ctx.draft.todo(key, f"{origin}: {exc}", where=where)
        return
    if not isinstance(spec, dict):
        ctx.draft.todo(key, f"{origin}: not a conda specification (a mapping with dependencies)", where=where)
        return
    conda_file_packages(ctx.draft, spec, where)
    ctx.draft.note("changed", f"{key}: {origin} → conda_packages and pip_packages", where)
