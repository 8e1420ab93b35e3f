"""The layout of one run's directory."""

from __future__ import annotations

import errno
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from runner.errors import DiskFullError, HistoryError
from runner.history.untrusted import read_json

if TYPE_CHECKING:  # the manifest's pydantic models: ~90 ms that `tftrain runs` does without
    from runner.manifest.model import Manifest

# a write refused for want of space: what the one-line error calls it
SPACE_ERRORS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file size limit exceeded"}


class RuntimePaths(NamedTuple):
    """The run's directories as the training process sees them (on this machine, or in a container)."""

    workdir: str
    outputs: str
    logs: str
    metrics_dir: str
    pythonpath: str
    inputs: dict[str, str]
    resume: str | None
    launch_dir: str = ""  # files a launcher writes (an MPI hostfile)

    def metrics_file(self, rank: int) -> str:
        return f"{self.metrics_dir}/{rank}.jsonl"


class RunPaths(NamedTuple):
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
    def reserve(self) -> Path:
        """Space held while the run is in progress, given back to record how it ended on a full disk."""
        return self.root / ".reserve"

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

    def link_runner(self) -> Path:
        """pythonpath/runner → this tftrain's package (made once); returns pythonpath."""
        import runner

        self.pythonpath.mkdir(parents=True, exist_ok=True)
        link = self.pythonpath / "runner"
        if not link.exists():
            link.symlink_to(Path(runner.__file__).parent, target_is_directory=True)
        return self.pythonpath

    @property
    def serving(self) -> Path:
        """What the gate found: serving.json, the sample and its predictions, model.onnx."""
        return self.root / "serving"

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
        from runner.manifest import stored_manifest

        try:
            manifest = stored_manifest(run.manifest)
        except ValueError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            why = f"run {run.run_id}: its manifest in the history cannot be read ({first})"
            raise HistoryError(f"{why}: run `tftrain doctor --rebuild`") from None
        return manifest, cls(run.run_dir, manifest.outputs_dir, manifest.logs_dir)

    def create(self) -> None:
        for directory in (self.workdir, self.metrics_dir):
            directory.mkdir(parents=True, exist_ok=True)


def space_error(exc: OSError, path: Path) -> DiskFullError | None:
    """The one-line error for a write refused for want of space, else None."""
    what = SPACE_ERRORS.get(exc.errno)
    return DiskFullError(f"{what} writing {path}") if what else None


@contextmanager
def writing(path: Path):
    """Out of space while writing `path` → DiskFullError naming it; what was written stays."""
    try:
        yield
    except OSError as exc:
        error = space_error(exc, path)
        if error is None:
            raise
        raise error from None


def read_record(path: Path) -> dict:
    """A run.json (or version.json) as a dict; OSError or ValueError when missing or unreadable."""
    record = read_json(path, path.name)  # runner.history.untrusted: bounded, never a FIFO's endless wait
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def write_record(path: Path, record: dict) -> None:
    """Replace run.json atomically: a reader sees the old record or the new one, never half of one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps(record, indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass
        raise space_error(exc, path) or HistoryError(f"cannot write {path} ({exc.strerror or exc})") from None
