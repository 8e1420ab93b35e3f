"""script_params → an argv list. Nothing here (or anywhere) goes through a shell. The whole argv
(interpreter, script, these arguments) is PlanContext.script_argv."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.manifest.fields import InputRef, ResumeRef
from runner.manifest.model import Manifest


def script_path(entry_script: str) -> str:
    """The entry script as python's argv names it: a path, never an option (`-c`, `-m`, `-`)."""
    return f"./{entry_script}" if entry_script.startswith("-") else entry_script


def script_args(
    manifest: Manifest, input_paths: Mapping[str, Path] | None = None, resume_path: Path | None = None
) -> list[str]:
    args: list[str] = []
    for flag, value in manifest.script_params.items():
        args += param_args(flag, value, input_paths or {}, resume_path)
    return args


def param_args(flag: str, value, input_paths: Mapping[str, Path], resume_path: Path | None) -> list[str]:
    if value is True or value is None:
        return [flag]  # a bare flag, like argparse's store_true
    if value is False:
        return []
    if isinstance(value, InputRef):
        return [flag, str(input_paths[value.input])]
    if isinstance(value, ResumeRef):
        if resume_path is None:
            raise ValueError(f"script_params.{flag}: resume_from was not resolved")
        return [flag, str(resume_path)]
    if isinstance(value, list):
        return [flag, *(_text(item) for item in value)]
    return [flag, _text(value)]


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
