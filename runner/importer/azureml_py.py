"""Azure ML SDK v1 (a `.py` script or an `.ipynb` notebook) → a Draft of tftrain.yml.

The job is the submitted TensorFlow(...) / Estimator(...) / ScriptRunConfig(...) (the last one
when none is submitted); its arguments, and the SDK objects they name, map key by key.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import ManifestError
from runner.importer import azureml_env, azureml_job, azureml_scoring, hyperdrive
from runner.importer.context import ImportContext, relative
from runner.importer.datainputs import add_input, is_data
from runner.importer.draft import Draft, finish, model_name
from runner.importer.interp import Interpreter, read_script
from runner.importer.mapping import bool_as_text, group_flags, put_positional
from runner.importer.notebook import Written, report_magics, written_files
from runner.importer.sdk import JOBS
from runner.importer.source import PythonSource, read_python
from runner.importer.values import Obj, Unknown

HANDLED = {
    "source_directory", "entry_script", "script", "arguments", "script_params", "inputs", "command",
    "source_directory_data_store",
    *azureml_env.HANDLED, *azureml_job.HANDLED,
}  # fmt: skip


@dataclass
class PyImport(ImportContext):
    """What the mapping functions share: the source, its reading, the draft, where things go."""

    source: PythonSource = field(kw_only=True)
    interp: Interpreter = field(kw_only=True)
    input_names: dict[int, str] = field(default_factory=dict)
    written: dict[Path, Written] = field(default_factory=dict)  # notebooks: the files its %%writefile cells write

    def where(self, line: int | None) -> str:
        return self.source.where(line)

    def segment(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def at(self, obj: Obj, key: str) -> str:
        """Where the argument `key` of the call that made `obj` is written."""
        return self.where(obj.attrs.get("_lines", {}).get(key, obj.line))

    def line_of(self, value: Any, default: int) -> int:
        node = value.node if isinstance(value, (Unknown, Obj)) else None
        return getattr(node, "lineno", None) or getattr(value, "line", None) or default

    def variable_of(self, value: Any) -> str | None:
        return next((name for name, bound in self.interp.names.items() if bound is value), None)

    def shown(self, value: Any) -> str:
        if isinstance(value, (Unknown, Obj)) and value.node is not None:
            return self.segment(value.node)
        if isinstance(value, list):
            return "[" + ", ".join(self.shown(item) for item in value) + "]"
        return repr(value)

    def unresolved(self, path: str | tuple[str, ...], value: Any, default_line: int, placeholder: Any = None) -> None:
        first = next((v for v in value if isinstance(v, (Unknown, Obj))), None) if isinstance(value, list) else value
        line = self.line_of(first, default_line)
        self.draft.unresolved(path, self.shown(value), self.where(line), placeholder)


def import_python(path: Path, manifest_dir: Path) -> Draft:
    """`manifest_dir`: resolved."""
    source = read_python(path, str(path))
    interp = read_script(source)  # errors name the file as given
    # the manifest's comments and the report name it as seen from the manifest
    resolved = path.resolve()
    source = dataclasses.replace(source, label=relative(resolved, manifest_dir))
    if not interp.jobs:
        raise ManifestError(f"{path}: no Azure ML TensorFlow(...), Estimator(...) or ScriptRunConfig(...) found")
    draft = Draft(origin="")
    ctx = PyImport(draft, manifest_dir, resolved.parent, source=source, interp=interp)
    ctx.written = written_files(ctx)
    job, experiment, sweep = _chosen(ctx)
    draft.origin = f"{job.via}(...) at {source.where(job.line)}"
    if sweep is not None:
        draft.origin = f"{sweep.via}(...) at {source.where(sweep.line)}, its trials {draft.origin}"
    draft.header = [f"Imported by `tftrain import azureml` from {draft.origin}. Azure ML:"]
    for call in (job, sweep) if sweep is not None else (job,):
        end = getattr(call.node, "end_lineno", call.line)
        draft.header += ["  " + line for line in source.text.splitlines()[call.line - 1 : min(end, call.line + 24)]]
    _code(ctx, job)
    if "source_directory_data_store" in job.attrs:  # Azure's file share behind the snapshot and outputs
        draft.note(
            "info",
            f"source_directory_data_store={ctx.shown(job.attrs['source_directory_data_store'])}: not needed — each run"
            " copies source_directory into its own run directory (.tftrainignore, else .amlignore or .gitignore, leave"
            " files out); checkpoints that must outlive a lost machine go to checkpoints.sync_to",
            ctx.at(job, "source_directory_data_store"),
        )
    azureml_env.environment(ctx, job)
    azureml_job.distribution(ctx, job)
    azureml_job.compute(ctx, job)
    registered = azureml_job.model(ctx)
    azureml_scoring.deployment(ctx)
    _name(ctx, experiment, registered)
    if sweep is not None:
        hyperdrive.from_hyperdrive(ctx, sweep)
    for key, value in job.attrs.items():
        if key not in HANDLED and not key.startswith("_") and key != "*":
            draft.note("dropped", f"{key}={ctx.shown(value)}: no equivalent in tftrain", ctx.at(job, key))
    report_magics(ctx)
    finish(draft, path.stem)
    return draft


def _chosen(ctx: PyImport) -> tuple[Obj, Obj | None, Obj | None]:
    """The job to import, its experiment, and the HyperDriveConfig that tunes it when one was submitted."""
    submitted: list[tuple[Obj, Any, Obj | None]] = []
    for config, experiment, _line in ctx.interp.submitted:
        sweep = config if config.kind == "HyperDriveConfig" else None
        if sweep is not None:
            config = sweep.attrs.get("run_config", sweep.attrs.get("estimator"))
        if isinstance(config, Obj) and config.kind in JOBS:
            submitted.append((config, experiment, sweep))
        elif sweep is not None:
            submitted.append((ctx.interp.jobs[-1], experiment, sweep))
    job, experiment, sweep = submitted[-1] if submitted else (ctx.interp.jobs[-1], None, None)
    for other in ctx.interp.jobs:
        if other is not job:
            ctx.draft.note(
                "dropped", f"another {other.via}(...): not imported (one job per manifest)", ctx.where(other.line)
            )
    if experiment is None and ctx.interp.experiments:
        experiment = ctx.interp.experiments[-1]
    return job, experiment if isinstance(experiment, Obj) else None, sweep


def _name(ctx: PyImport, experiment: Obj | None, registered: Any) -> None:
    for what, value in (("experiment", experiment.attrs.get("name") if experiment else None), ("model", registered)):
        name = model_name(value) if isinstance(value, str) else None
        if name:
            ctx.draft.put("name", name)
            if name != value:
                ctx.draft.note("changed", f"name: {what} name {value!r} → {name!r} (letters, digits, '.', '_', '-')")
            return
        if isinstance(value, Unknown):
            ctx.draft.note("info", f"name: the {what} name {ctx.segment(value.node)} is not known statically")


def _code(ctx: PyImport, job: Obj) -> None:
    attrs, draft = job.attrs, ctx.draft
    folder = attrs.get("source_directory", ".")
    if isinstance(folder, str):
        seen = ctx.relative((ctx.input_dir / folder).resolve())
        draft.put("source_directory", seen)
        if os.path.normpath(seen) != os.path.normpath(folder):
            draft.note("changed", f"source_directory: {folder!r} → {seen!r} (relative to the manifest)")
    else:
        ctx.unresolved("source_directory", folder, job.line, placeholder=".")
    script = attrs.get("entry_script", attrs.get("script"))
    if script is None and isinstance(attrs.get("command"), (str, list)):
        draft.note(
            "todo", "entry_script: ScriptRunConfig(command=...) is not imported; set entry_script and script_params"
        )
    if isinstance(script, str):
        draft.put("entry_script", script)
    elif script is None:
        draft.todo("entry_script", "no entry script was given", placeholder="train.py")
    else:
        ctx.unresolved("entry_script", script, job.line, placeholder="train.py")
    params = attrs.get("script_params", attrs.get("arguments"))
    if isinstance(params, dict):
        for flag, value in params.items():
            if isinstance(flag, str):
                put_param(ctx, flag, value, job.line)
            else:
                where = ctx.where(ctx.line_of(flag, job.line))
                draft.note(
                    "todo", f"script_params: a flag not known statically: {ctx.shown(flag)}: add it by hand", where
                )
    elif isinstance(params, list):
        _arguments(ctx, params, job.line)
    elif params is not None:
        ctx.unresolved("script_params", params, job.line)
    inputs = attrs.get("inputs")
    for item in inputs if isinstance(inputs, list) else []:
        name = add_input(ctx, item, "data") if is_data(item) else None
        if name:
            draft.note(
                "info",
                f"inputs.{name}: the script read $AZUREML_DATAREFERENCE_…; tftrain sets TFTRAIN_INPUT_{name.upper()}",
            )
        else:
            ctx.unresolved("inputs", item, job.line)


def _arguments(ctx: PyImport, items: list[Any], line: int) -> None:
    """ScriptRunConfig's argv list (a list value when a flag takes several scalars)."""
    for flag, values in group_flags(items):
        if flag is not None:
            put_param(ctx, flag, values[0] if len(values) == 1 else (values or None), line)
        else:
            put_positional(ctx, values[0], ctx.where(ctx.line_of(values[0], line)))


def put_param(ctx: PyImport, flag: str, value: Any, line: int) -> None:
    path = ("script_params", flag)
    if value is None or value == "":
        ctx.draft.put(path, True)  # Azure ML passed a bare flag; so does `true`
    elif isinstance(value, bool):
        ctx.draft.put(path, bool_as_text(ctx, flag, value))
    elif isinstance(value, (int, float, str)):
        ctx.draft.put(path, value)
    elif is_data(value) and (name := add_input(ctx, value, flag.lstrip("-"))):
        ctx.draft.put(path, {"input": name})
    elif isinstance(value, Obj) and value.kind == "output":
        name = value.attrs.get("name") if isinstance(value.attrs.get("name"), str) else flag.lstrip("-")
        ctx.draft.put(path, f"outputs/{name}")
        ctx.draft.note(
            "changed",
            f"script_params.{flag}: an Azure ML output → outputs/{name}, kept with the run",
            ctx.where(value.line),
        )
    elif isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value):
        ctx.draft.put(path, [str(v) if isinstance(v, bool) else v for v in value])
    else:
        ctx.unresolved(path, value, line)
