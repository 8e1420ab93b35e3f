"""Rules of model.serving's scoring-script keys (Azure's entry script on azmlinfsrv): the script,
its conda file and its sample request are plain files inside source_directory, reached through no
symlink (each part of the path is checked, not only where it resolves), and they need the gate,
which runs init() and run() before the model is registered."""

from __future__ import annotations

import posixpath
import stat
from pathlib import Path, PurePosixPath

from runner.manifest.document import Location
from runner.manifest.model import Manifest
from runner.manifest.sourcepaths import regular_file_problem, text_file_problem

Problem = tuple[Location, str]
KEY = ("model", "serving")


def check_scoring(manifest: Manifest, base_dir: Path) -> list[Problem]:
    spec = manifest.model
    serving = spec.serving
    problems: list[Problem] = []
    for index, package in enumerate(serving.pip_packages):
        if not package.strip() or package.lstrip().startswith("-") or not package.isprintable():
            problems.append(((*KEY, "pip_packages", index), f"{package!r} is not a package (no pip options here)"))
    if serving.scoring_script is None:
        for key in ("conda_file", "pip_packages", "sample_request"):
            if getattr(serving, key):
                problems.append(
                    ((*KEY, key), f"model.serving.{key} belongs to a scoring script: set model.serving.scoring_script")
                )
        if serving.auth:
            problems.append(
                (
                    (*KEY, "auth"),
                    (
                        "model.serving.auth protects a scoring script's /score: set model.serving.scoring_script "
                        "(tftrain serve --auth-token-env protects the other servers)"
                    ),
                )
            )
        return problems
    if serving.conda_file and serving.pip_packages:
        problems.append(((*KEY, "pip_packages"), "give conda_file or pip_packages, not both"))
    if spec.gate == "off" or not spec.register_model:
        problems.append(
            (
                (*KEY, "scoring_script"),
                (
                    "the gate runs the scoring script's init() and run() before registering: "
                    "set model.gate to auto or required and keep model.register on"
                ),
            )
        )
    suffixes = {"scoring_script": ".py", "sample_request": ".json", "conda_file": (".yml", ".yaml")}
    wrong = set()
    for key, suffix in suffixes.items():
        name = getattr(serving, key)
        if name is not None and not name.lower().endswith(suffix):
            wrong.add(key)
            problems.append(
                (
                    (*KEY, key),
                    f"{name!r} must be a {' or '.join((suffix,) if isinstance(suffix, str) else suffix)} file",
                )
            )
    problems += [((*KEY, key), problem) for key, problem in file_problems(manifest, base_dir) if key not in wrong]
    return problems


def file_problems(manifest: Manifest, base_dir: Path) -> list[tuple[str, str]]:
    """(key, why) for each scoring file that is missing, outside source_directory or behind a link;
    checked again where registration copies them."""
    try:
        source = (base_dir / manifest.source_directory).resolve()
    except (OSError, RuntimeError):
        return []  # reported for source_directory
    serving = manifest.model.serving
    found = []
    for key in ("scoring_script", "sample_request", "conda_file"):
        name = getattr(serving, key)
        if name is None:
            continue
        problem = link_problem(source, name) or regular_file_problem(source, name)
        if problem is None and key != "scoring_script":
            problem = text_file_problem(source, name)
        if problem:
            found.append((key, problem))
    return found


def link_problem(base: Path, relative: str) -> str | None:
    """Why `relative` cannot be read as itself: absolute, climbing with '..', or a symlink at any
    part of its path; None when every part is a plain directory or file inside `base`."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts or posixpath.normpath(relative) in (".", ""):
        return f"{relative!r} must be a relative path inside source_directory"
    for depth in range(1, len(path.parts) + 1):
        part = "/".join(path.parts[:depth])
        try:
            mode = (base / part).lstat().st_mode
        except (OSError, ValueError):
            return None  # missing: regular_file_problem says so
        if stat.S_ISLNK(mode):
            return (
                f"{relative!r} goes through the symlink {part!r} in {base}: the scoring files must be plain files in"
                " source_directory"
            )
    return None
