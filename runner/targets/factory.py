"""A fresh target by name (runner.shared.catalog lists them). Its backend is imported only when a
run asks for it: `tftrain --version` and a local run never load the docker or Kubernetes clients."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from runner.errors import UnsupportedError
from runner.shared.catalog import module_of, row_of
from runner.targets.base import Target

if TYPE_CHECKING:
    from runner.settings import Settings


def target_for(name: str, settings: Settings | None = None) -> Target:
    """A fresh target for one run: what it reserves lives as long as the run. `settings`: the
    command's (what the machine's environment says, read once by runner.settings)."""
    row = row_of(name)
    if row is None:
        raise UnsupportedError(f"compute.target: {name!r} is not available in this version of tftrain")
    module = module_of(name)
    try:
        cls = getattr(importlib.import_module(module), row.cls)
    except (ImportError, AttributeError) as exc:  # a plugin's row naming what is not there
        raise UnsupportedError(
            f"compute.target: {name}: its class {module}.{row.cls} cannot be loaded: {exc}"
        ) from None
    return cls(settings)


def target_command(name: str) -> ModuleType:
    """The module behind a backend's own command (`tftrain pool`: runner/targets/pool/survey.py),
    named in its catalog row; imported when that command runs."""
    row = row_of(name)
    if row is None or row.command is None:
        raise UnsupportedError(f"target {name!r} has no command of its own")
    return importlib.import_module(f"{module_of(name).rpartition('.')[0]}.{row.command}")
