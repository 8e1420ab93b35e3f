"""Where tftrain keeps runs, models and caches."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return None


def tftrain_home() -> Path:
    """TFTRAIN_HOME, else `.tftrain` at the top of the git checkout, else in the current directory."""
    env = os.environ.get("TFTRAIN_HOME")
    if env:
        return Path(env).resolve()
    return (repo_root() or Path.cwd().resolve()) / ".tftrain"


def cache_dir() -> Path:
    env = os.environ.get("TFTRAIN_CACHE_DIR")
    if env:
        return Path(env).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tftrain"


def data_cache() -> Path:
    """Where remote inputs are kept, under their content's digest (runner.training.downloads)."""
    return cache_dir() / "data"
