"""Small builders that unit and integration tests share: a plan's runtime paths, pool hosts and
leases, a manifest loaded from a script, a logger that keeps what it was told."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

from runner.history.rundir import RuntimePaths
from runner.manifest.model import Manifest
from runner.targets.pool.leases import Leases
from runner.targets.pool.schedule import Capacity

RUNTIME = RuntimePaths(
    "/run/workdir", "/run/workdir/outputs", "/run/workdir/logs", "/run/metrics.d", "/run/py", {}, None, "/run/launch"
)


PYTHON = "/venv/bin/python"


def hosts(*specs: tuple[str, int, int]) -> list[Capacity]:
    return [Capacity(name, gpus, cpus) for name, gpus, cpus in specs]


def leases_at(tmp_path: Path, ttl: float = 60) -> Leases:
    return Leases(tmp_path / "state", ttl)


def loaded(tmp_path, script: str, **fields):
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    manifest = Manifest.model_validate({"name": "m", "entry_script": "train.py", **fields})
    return SimpleNamespace(manifest=manifest, source_dir=tmp_path)


class Notes:
    """A logger that keeps its infos and warnings, for a test to read."""

    def __init__(self) -> None:
        self.infos, self.warnings = [], []

    def info(self, message, style=None):
        self.infos.append(message)

    def warning(self, message):
        self.warnings.append(message)
