"""The layout of one run's directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.manifest.model import Manifest


@dataclass(frozen=True)
class RuntimePaths:
    """The run's directories as the training process sees them (on this machine, or in a container)."""

    workdir: str
    outputs: str
    logs: str
    metrics_dir: str
    pythonpath: str
    inputs: dict[str, str] = field(hash=False)
    resume: str | None
    launch_dir: str = ""  # files a launcher writes (an MPI hostfile)

    def metrics_file(self, rank: int) -> str:
        return f"{self.metrics_dir}/{rank}.jsonl"


@dataclass(frozen=True)
class RunPaths:
    root: Path
    outputs_dir: str = "outputs"
    logs_dir: str = "logs"

    @classmethod
    def for_run(cls, home: Path, run_id: str, manifest: Manifest) -> RunPaths:
        return cls(home / "runs" / run_id, manifest.outputs_dir, manifest.logs_dir)

    @property
    def workdir(self) -> Path:
        """The snapshot of the source directory; the training's working directory."""
        return self.root / "workdir"

    @property
    def outputs(self) -> Path:
        return self.workdir / self.outputs_dir

    @property
    def logs(self) -> Path:
        return self.workdir / self.logs_dir

    @property
    def metrics_dir(self) -> Path:
        """Where each rank's $TFTRAIN_METRICS_FILE lives."""
        return self.root / "metrics.d"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def metrics_summary(self) -> Path:
        return self.root / "metrics.json"

    @property
    def lock(self) -> Path:
        return self.root / "manifest.lock.yml"

    @property
    def record(self) -> Path:
        return self.root / "run.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.md"

    @property
    def release_dir(self) -> Path:
        """The assets `tftrain publish` uploads, as built for the release."""
        return self.root / "release"

    @property
    def release_state(self) -> Path:
        """The release a publish made and the assets it verified: what a stopped publish resumes."""
        return self.root / "release.json"

    @property
    def prepare_log(self) -> Path:
        return self.root / "prepare.log"

    @property
    def launch_dir(self) -> Path:
        return self.root / "launch"

    @property
    def pythonpath(self) -> Path:
        """Holds a link to the `runner` package, for scripts in a virtualenv without tftrain."""
        return self.root / "pythonpath"

    def rank_log(self, rank: int) -> Path:
        return self.logs / f"{rank}.log"

    def metrics_file(self, rank: int) -> Path:
        return self.metrics_dir / f"{rank}.jsonl"

    def runtime(self, inputs: dict[str, Path], resume: Path | None) -> RuntimePaths:
        """The view of a process running on this machine: the paths themselves."""
        return RuntimePaths(
            workdir=str(self.workdir),
            outputs=str(self.outputs),
            logs=str(self.logs),
            metrics_dir=str(self.metrics_dir),
            pythonpath=str(self.pythonpath),
            inputs={name: str(path) for name, path in inputs.items()},
            resume=str(resume) if resume else None,
            launch_dir=str(self.launch_dir),
        )

    @classmethod
    def of_run(cls, run) -> tuple[Manifest, RunPaths]:
        """The manifest a recorded run (a store.RunRow) ran with, and its paths."""
        manifest = Manifest.model_validate_json(run.manifest)
        return manifest, cls(run.run_dir, manifest.outputs_dir, manifest.logs_dir)

    def create(self) -> None:
        for directory in (self.workdir, self.metrics_dir):
            directory.mkdir(parents=True, exist_ok=True)
