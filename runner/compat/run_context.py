"""Azure ML's `Run` API, routed into tftrain, for training scripts that stay unchanged.

`Run.get_context()` gives the run tftrain is running: what it logs lands in the run's metrics
(metrics file, summary, pull-request comment, release) like any captured metric; files it
uploads land in outputs. Standard library only: it is imported inside the training
environment. A call it does not support raises NotImplementedError naming the call and what to
use with tftrain instead — never a silent no-op.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

from runner.api import append_record

GUIDE = "see docs/azureml.md: Coming from Azure ML"
ALTERNATIVES = {
    "register_model": "declare `model: {path: outputs/…}` in tftrain.yml; tftrain registers it when the run completes",
    "log_confusion_matrix": "log the numbers with run.log_list/log_row, or save a plot with run.log_image",
    "log_accuracy_table": "log the numbers with run.log_list/log_row, or save a plot with run.log_image",
    "log_predictions": "log the numbers with run.log_list/log_row, or save a plot with run.log_image",
    "log_residuals": "log the numbers with run.log_list/log_row, or save a plot with run.log_image",
    "submit_child": "child runs do not exist in tftrain: use distributed_training, or a second manifest",
    "child_run": "child runs do not exist in tftrain: use distributed_training, or a second manifest",
    "get_children": "child runs do not exist in tftrain",
    "cancel": "stop the run with Ctrl-C / SIGTERM to tftrain, or max_run_duration_seconds",
    "start_logging": "offline experiments: run `tftrain run` instead",
    "wait_for_completion": "`tftrain run` waits; `tftrain logs RUN --follow` follows a run",
}


def _not_supported(call: str) -> NotImplementedError:
    hint = ALTERNATIVES.get(call.rsplit(".", 1)[-1], GUIDE)
    return NotImplementedError(f"{call} is not supported by tftrain's azureml compatibility layer; {hint}")


class _Experiment:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Experiment(name={self.name!r})"

    def __getattr__(self, name: str):
        raise _not_supported(f"Experiment.{name}")


class Run:
    """The run tftrain is running (one per process)."""

    _context: Run | None = None

    def __init__(self) -> None:
        self.id = os.environ.get("TFTRAIN_RUN_ID", "OfflineRun")
        self.number = 0
        self.experiment = _Experiment(os.environ.get("TFTRAIN_EXPERIMENT", "offline"))
        self.parent = None
        self.input_datasets = json.loads(os.environ.get("TFTRAIN_INPUTS") or "{}")
        self._outputs = Path(os.environ.get("TFTRAIN_OUTPUTS_DIR") or "outputs")
        self._metrics: dict[str, list] = {}
        self._tags: dict[str, str] = {}
        self._status = "Running"

    @classmethod
    def get_context(cls, allow_offline: bool = True, **_) -> Run:
        if cls._context is None:
            cls._context = cls()
        return cls._context

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, experiment={self.experiment.name!r}) [tftrain]"

    def __getattr__(self, name: str):
        raise _not_supported(f"Run.{name}")

    # metrics ---------------------------------------------------------------------------------
    def log(self, name: str, value, description: str = "", step: int | None = None) -> None:
        """A number becomes a metric point (step: how many were logged under the name); text, a tag."""
        if isinstance(value, str) or not _is_number(value):
            self.tag(name, value)
            return
        series = self._metrics.setdefault(name, [])
        append_record(_point(name, value, len(series) if step is None else step))
        series.append(value)

    def log_list(self, name: str, value, description: str = "") -> None:
        for item in value:
            self.log(name, item)

    def log_row(self, name: str, description: str | None = None, **columns) -> None:
        for column, value in columns.items():
            self.log(f"{name}.{column}", value)

    def log_table(self, name: str, value: dict, description: str = "") -> None:
        for column, values in value.items():
            self.log_list(f"{name}.{column}", values)

    def log_image(self, name: str, path: str | None = None, plot=None, description: str = "") -> None:
        """Saved as outputs/images/NAME.png (from `path`, or a matplotlib `plot`), listed with the metrics."""
        if (path is None) == (plot is None):
            raise ValueError("log_image needs exactly one of path= or plot=")
        folder = self._outputs / "images"
        folder.mkdir(parents=True, exist_ok=True)
        suffix = Path(path).suffix if path else ".png"
        target = folder / f"{_safe(name)}{suffix or '.png'}"
        if path is not None:
            shutil.copyfile(path, target)
        else:
            plot.savefig(target)
        append_record({"image": str(target.relative_to(self._outputs.parent)), "name": name})

    def get_metrics(
        self, name: str | None = None, recursive: bool = False, run_type=None, populate: bool = False
    ) -> dict:
        """What this process logged: a value, or a list when logged more than once."""
        table = {key: values[0] if len(values) == 1 else list(values) for key, values in self._metrics.items()}
        return {name: table[name]} if name is not None and name in table else ({} if name is not None else table)

    # tags ------------------------------------------------------------------------------------
    def tag(self, key: str, value=None) -> None:
        text = "" if value is None else str(value)
        self._tags[str(key)] = text
        append_record({"tag": str(key), "value": text})

    def set_tags(self, tags) -> None:
        if isinstance(tags, dict):
            for key, value in tags.items():
                self.tag(key, value)
        else:
            for key in [tags] if isinstance(tags, str) else tags:
                self.tag(key)

    def get_tags(self) -> dict:
        return dict(self._tags)

    # files -----------------------------------------------------------------------------------
    def upload_file(self, name: str, path_or_stream, datastore_name: str | None = None) -> None:
        target = self._target(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if hasattr(path_or_stream, "read"):
            with target.open("wb") as handle:
                shutil.copyfileobj(path_or_stream, handle)
        else:
            shutil.copyfile(path_or_stream, target)

    def upload_files(
        self, names, paths, return_artifacts: bool = False, timeout_seconds=None, datastore_name=None
    ) -> None:
        for name, path in zip(names, paths):
            self.upload_file(name, path)

    def upload_folder(self, name: str, path: str, datastore_name: str | None = None) -> None:
        shutil.copytree(path, self._target(name), dirs_exist_ok=True)

    def get_file_names(self) -> list[str]:
        """Everything in outputs, named as Azure names run files: `outputs/…`."""
        root = self._outputs
        return (
            sorted(f"outputs/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file())
            if root.is_dir()
            else []
        )

    def download_file(self, name: str, output_file_path: str | None = None, _validate_checksum: bool = False) -> None:
        source = self._target(name)
        if not source.is_file():
            raise FileNotFoundError(f"{name}: not in this run's outputs ({self._outputs})")
        destination = Path(output_file_path or Path(name).name)
        if destination.is_dir():
            destination = destination / source.name
        shutil.copyfile(source, destination)

    def download_files(self, prefix: str | None = None, output_directory: str | None = None, **_) -> None:
        for name in self.get_file_names():
            if prefix is None or name.startswith(prefix):
                target = Path(output_directory or ".") / name
                target.parent.mkdir(parents=True, exist_ok=True)
                self.download_file(name, str(target))

    def _target(self, name: str) -> Path:
        """Azure names run files from the run's root (`outputs/model.pkl`); tftrain keeps them in outputs."""
        relative = Path(name.replace("\\", "/"))
        if relative.parts[:1] == ("outputs",):
            relative = Path(*relative.parts[1:])
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ValueError(f"{name!r}: run file names are relative paths inside the run")
        return self._outputs / relative

    # status ----------------------------------------------------------------------------------
    def get_status(self) -> str:
        return self._status

    def complete(self, _set_status: bool = True) -> None:
        """Completed as far as the script is concerned; tftrain ends the run when the script ends."""
        self._status = "Completed"

    def fail(self, error_details=None, error_code=None, _set_status: bool = True) -> None:
        """The run ends Failed, whatever the script's exit code, with these details."""
        self._status = "Failed"
        append_record({"status": "failed", "error": "" if error_details is None else str(error_details)})

    def flush(self, timeout_seconds: int = 300) -> None:
        """Every call writes through at once: nothing is buffered."""


def _point(name: str, value, step: int) -> dict:
    number = float(value)
    return {"name": str(name), "value": number if math.isfinite(number) else str(number), "step": int(step)}


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "image"


class _Refusing(type):
    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _not_supported(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        raise _not_supported(f"{cls.__qualname__}()")


def stub(module: str, name: str) -> type:
    """A stand-in for an SDK class the shim does not provide (Workspace, Dataset, …): importing
    it works, as scripts often import more than they use in a run; using it raises."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _Refusing(name, (), {"__module__": module, "__qualname__": name})
