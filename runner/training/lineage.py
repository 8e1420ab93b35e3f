"""Where a run came from: the git checkout (runs.git, run.json, the model's info) and
manifest.lock.yml (tftrain version, manifest, environment with its packages, inputs, plan).

The training needs neither, so both are written once the plan has started (supervise calls
`record` before its first look), or at the end for a run that never started."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import runner
from runner.environments.prepared import Environment
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.plan.model import LaunchPlan
from runner.training.gitinfo import git_info
from runner.training.inputs import digest_of


class Lineage:
    def __init__(
        self,
        loaded: LoadedManifest,
        paths: RunPaths,
        env: Environment,
        plan: LaunchPlan,
        inputs: dict[str, Path],
        keep_git: Callable[[dict], None],
        warn: Callable[[str], None],
    ) -> None:
        self.loaded, self.paths, self.env, self.plan, self.inputs = loaded, paths, env, plan, inputs
        self.keep_git, self.warn = keep_git, warn
        self.git: dict = {}
        self.recorded = False

    def record(self) -> None:
        """Once: the git lineage into the store, then the lock file. A lock that cannot be written
        (a full disk) is a warning: the training goes on, and its logs say the rest."""
        if self.recorded:
            return
        self.recorded = True
        self.git = git_info(self.loaded.source_dir)
        self.keep_git(self.git)
        try:
            write_lock(self.paths.lock, self.loaded, self.env, self.git, self.plan, self.inputs)
        except OSError as exc:
            self.warn(f"{self.paths.lock}: not written: {exc.strerror or exc}")


def write_lock(
    target: Path, loaded: LoadedManifest, env: Environment, git: dict, plan: LaunchPlan, inputs: dict[str, Path]
) -> None:
    import yaml

    specs = loaded.manifest.inputs
    lock = {
        "tftrain_version": runner.__version__,
        "manifest": loaded.manifest.model_dump(mode="json", by_alias=True),
        "manifest_path": str(loaded.path),
        "environment": {"python": env.python, "description": env.description, "image": env.image, **env.described()},
        "git": git,
        "inputs": {name: {"source": specs[name].source, "sha256": digest_of(path)} for name, path in inputs.items()},
        "plan": plan.to_dict(),
    }
    target.write_text(yaml.safe_dump(lock, sort_keys=False), encoding="utf-8")
