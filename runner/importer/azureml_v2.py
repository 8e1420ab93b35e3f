"""An Azure ML v2 command job (YAML: command, code, environment, distribution, inputs…) → a Draft."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import ManifestError
from runner.importer.draft import Draft, compute_note, curated_environment, finish, is_gpu_vm, model_name
from runner.importer.packages import conda_file_packages, environment_file
from runner.importer.values import looks_numeric
from runner.manifest.yamlfile import YamlDocument, load_yaml

REFERENCE = re.compile(r"\$\{\{\s*(inputs|outputs|search_space)\.([A-Za-z0-9_.-]+)\s*\}\}")
OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
DATA_TYPES = ("uri_folder", "uri_file", "mltable", "custom_model", "mlflow_model", "triton_model")
QUIET = {"$schema", "type", "description", "tags", "display_name", "name", "experiment_name", "code", "command",
         "environment", "environment_variables", "distribution", "resources", "inputs", "outputs", "compute", "limits"}  # fmt: skip


@dataclass
class V2Import:
    doc: YamlDocument  # its path as seen from the manifest
    draft: Draft
    manifest_dir: Path
    input_dir: Path

    def where(self, *loc: Any) -> str:
        return self.doc.where(loc)

    def shown(self, value: Any) -> str:
        return repr(value)

    def relative(self, path: Path) -> str:
        return Path(os.path.relpath(path, self.manifest_dir)).as_posix()

    def source_dir(self) -> Path | None:
        folder = self.draft.get("source_directory")
        return (self.manifest_dir / folder).resolve() if isinstance(folder, str) else None


def import_yaml(path: Path, manifest_dir: Path) -> Draft:
    doc = load_yaml(path)  # errors name the file as given; the manifest and report, as seen from the manifest
    label = Path(os.path.relpath(path.resolve(), manifest_dir.resolve()))
    doc = YamlDocument(label, doc.data, doc.lines)
    job = doc.data
    draft = Draft(origin=f"command job at {label}")
    if isinstance(job, dict) and job.get("type") == "sweep" and isinstance(job.get("trial"), dict):
        trial = {loc[1:]: line for loc, line in doc.lines.items() if loc[:1] == ("trial",)}
        if "compute" in job and "compute" not in job["trial"]:
            trial[("compute",)] = doc.lines.get(("compute",), 0)
            job["trial"] = {**job["trial"], "compute": job["compute"]}
        doc, job = YamlDocument(doc.path, job["trial"], trial), job["trial"]
        draft = Draft(origin=f"the trial of the sweep job at {label}")
        draft.note("dropped", "sweep job: tftrain has no sweeps; imported its trial (search_space values are TODOs)")
    if not isinstance(job, dict) or not isinstance(job.get("command"), str):
        raise ManifestError(f"{path}: not an Azure ML command job (no command: key), nor a Python file")
    ctx = V2Import(doc, draft, manifest_dir.resolve(), path.resolve().parent)
    draft.header = [f"Imported by `tftrain import azureml` from the Azure ML command job {label}."]
    for key in ("experiment_name", "display_name", "name"):
        if isinstance(job.get(key), str) and model_name(job[key]):
            draft.put("name", model_name(job[key]))
            break
    folder = job.get("code", ".")
    folder = folder[len("file:") :] if isinstance(folder, str) and folder.startswith("file:") else folder
    if isinstance(folder, str) and "://" not in folder and not folder.startswith("azureml:"):
        draft.put("source_directory", ctx.relative((ctx.input_dir / folder).resolve()))
    else:
        draft.todo("source_directory", f"code: {folder!r} is not a local folder", ".", ctx.where("code"))
    _command(ctx, job)
    _environment(ctx, job.get("environment"))
    variables = job.get("environment_variables") or {}
    for key, value in variables.items() if isinstance(variables, dict) else ():
        draft.put(
            ("environment_variables", str(key)), value if isinstance(value, (str, int, float, bool)) else str(value)
        )
    _resources(ctx, job)
    timeout = (job.get("limits") or {}).get("timeout")
    if isinstance(timeout, int) and timeout >= 1:
        draft.put("max_run_duration_seconds", timeout)
    for key in job:
        if key not in QUIET:
            draft.note("dropped", f"{key}: no equivalent in tftrain", ctx.where(key))
    finish(draft, path.stem)
    return draft


def _command(ctx: V2Import, job: dict) -> None:
    draft, where = ctx.draft, ctx.where("command")
    inputs = job.get("inputs") or {}
    text = OPTIONAL.sub(
        lambda m: m[1] if all(kind != "inputs" or name in inputs for kind, name in REFERENCE.findall(m[1])) else "",
        job["command"],
    )
    commands = [part.strip() for part in re.split(r"\n|&&|;", text) if part.strip()]
    python = [c for c in commands if re.match(r"^(\w+=\S+\s+)*(python3?|python\d\.\d+)\s", c)]
    for other in commands:
        if other not in python[:1]:
            draft.note(
                "dropped", f"command part {other!r}: only the python script is run; put setup in the environment", where
            )
    tokens = shlex.split(python[0]) if python else []
    while tokens and (
        re.match(r"^\w+=", tokens[0]) or tokens[0].startswith("python") or tokens[0] in ("-u", "-B", "-O")
    ):
        tokens.pop(0)
    if not tokens or not tokens[0].endswith(".py"):
        draft.todo(
            "entry_script", f"command {job['command'].strip()!r}: no `python SCRIPT.py` found", "train.py", where
        )
        return
    draft.put("entry_script", tokens[0])
    used: set[str] = set()
    pairs: list[tuple[str, list[Any]]] = []
    for token in tokens[1:]:
        if token.startswith("-") and not looks_numeric(token) and not REFERENCE.fullmatch(token):
            flag, equals, value = token.partition("=")
            pairs.append((flag, [value] if equals else []))
        elif pairs:
            pairs[-1][1].append(token)
        elif REFERENCE.search(token):
            draft.note("todo", f"script_params: positional {token!r}: give the script a flag for it", where)
        else:
            draft.put(("script_params", token), None)
            draft.note("info", f"script_params: positional argument {token!r} is a key with no value (null)", where)
    for flag, values in pairs:
        converted = [_value(ctx, flag, value, inputs, used) for value in values]
        if any(value is _TODO for value in converted):
            sweep = "search_space." in " ".join(values)
            why = "a sweep parameter: pick one value" if sweep else "a reference tftrain cannot pass in part"
            draft.todo(("script_params", flag), f"{' '.join(values)!r}: {why}", where=where)
        else:
            draft.put(
                ("script_params", flag), True if not converted else converted[0] if len(converted) == 1 else converted
            )
    for name, spec in inputs.items():
        if name not in used and _is_data(spec):
            _input(ctx, name, spec)
            draft.note(
                "info", f"inputs.{name}: not in the command; the script finds it in $TFTRAIN_INPUT_{name.upper()}"
            )


_TODO = object()


def _value(ctx: V2Import, flag: str, token: str, inputs: dict, used: set[str]) -> Any:
    whole = REFERENCE.fullmatch(token)
    if whole and whole[1] == "inputs" and whole[2] in inputs:
        used.add(whole[2])
        spec = inputs[whole[2]]
        if _is_data(spec):
            return {"input": _input(ctx, whole[2], spec)}
        value = spec.get("default", spec.get("value")) if isinstance(spec, dict) else spec
        if isinstance(value, bool):  # Azure ML passed the text True/False; true here is a bare flag
            ctx.draft.note(
                "changed", f"script_params.{flag}: {value} is passed as the text {str(value)!r}, as Azure ML did"
            )
            return str(value)
        return _TODO if value is None or isinstance(value, (dict, list)) else value
    if whole and whole[1] == "outputs":
        output = ((ctx.doc.data.get("outputs") or {}).get(whole[2])) or {}
        if (
            isinstance(output, dict)
            and output.get("type") in ("custom_model", "mlflow_model", "triton_model")
            or "model" in whole[2]
        ):
            ctx.draft.put(("model", "path"), f"outputs/{whole[2]}")
        ctx.draft.note(
            "changed", f"script_params.{flag}: ${{{{outputs.{whole[2]}}}}} → outputs/{whole[2]}, kept with the run"
        )
        return f"outputs/{whole[2]}"
    if REFERENCE.search(token):
        return _TODO
    try:
        number = int(token) if re.fullmatch(r"-?\d+", token) else float(token)
        return number if str(number) == token else token
    except ValueError:
        return token


def _is_data(spec: Any) -> bool:
    return isinstance(spec, dict) and (spec.get("type") in DATA_TYPES or "path" in spec)


def _input(ctx: V2Import, name: str, spec: dict) -> str:
    where, path = ctx.where("inputs", name), str(spec.get("path", ""))
    mode = "mount" if str(spec.get("mode", "ro_mount")).endswith("mount") else "download"
    todo = "TODO(tftrain import): "
    source, comment = path, ""
    if path.startswith("azureml://") and (match := re.search(r"datastores/([^/]+)/paths/(.*)$", path)):
        source = f"s3://TODO/{match[1]}/{match[2].strip('/')}"
        comment = f"{todo}was datastore {match[1]!r} path {match[2].strip('/')!r}; copy it to S3/https or a local path"
    elif path.startswith("azureml:"):
        asset = path.removeprefix("azureml:").split("@")[0].split(":")[0]
        source, comment = (
            f"s3://TODO/{asset}",
            f"{todo}was data asset {path!r}; copy its files to S3/https or a local path",
        )
    elif path.startswith(("wasbs://", "abfss://", "adl://")):
        source, comment = f"s3://TODO/{name}", f"{todo}was {path!r}; copy it to S3/https or a local path"
    elif "://" not in path:
        found = (ctx.input_dir / path.removeprefix("file:")).resolve()
        if found.exists():
            source = ctx.relative(found)
        else:
            source, comment = f"s3://TODO/{name}", f"{todo}was local {path!r} (not found); give the data's path"
    ctx.draft.put(("inputs", name, "source"), source, comment)
    ctx.draft.put(("inputs", name, "mode"), mode)
    if comment:
        ctx.draft.note("todo", f"inputs.{name}.source: {comment.removeprefix(todo)}", where)
    return name


def _environment(ctx: V2Import, env: Any) -> None:
    draft, where = ctx.draft, ctx.where("environment")
    if isinstance(env, str):
        name = env.removeprefix("azureml:").split("@")[0].split(":")[0]
        if re.search(r"tensorflow-\d", name, re.IGNORECASE):
            curated_environment(draft, name, where)
        else:
            draft.note(
                "todo", f"environment {env!r}: a registered environment; set framework_version and the packages", where
            )
        return
    if not isinstance(env, dict):
        return
    if isinstance(env.get("image"), str):
        draft.put("custom_docker_image", env["image"])
        draft.put("use_docker", True)
    if isinstance(env.get("conda_file"), str):
        environment_file(ctx, "conda_dependencies_file", env["conda_file"].removeprefix("file:"), where)
    elif isinstance(env.get("conda_file"), dict):
        conda_file_packages(draft, env["conda_file"], where)
    if env.get("build"):
        draft.note("todo", "environment.build: build the image yourself and set custom_docker_image", where)


def _resources(ctx: V2Import, job: dict) -> None:
    draft, resources = ctx.draft, job.get("resources") or {}
    nodes = resources.get("instance_count", 1)
    distribution = job.get("distribution") or {}
    kind = str(distribution.get("type", "")).lower()
    where = ctx.where("distribution")
    if kind == "mpi":
        draft.put("node_count", nodes)
        draft.put(("distributed_training", "backend"), "mpi")
        draft.put(("distributed_training", "process_count_per_node"), distribution.get("process_count_per_instance", 1))
    elif kind == "tensorflow":
        workers = distribution.get("worker_count", nodes)
        servers = distribution.get("parameter_server_count", 0)
        draft.put("node_count", nodes)
        draft.put(("distributed_training", "backend"), "parameter_server" if servers else "multi_worker_mirrored")
        draft.put(("distributed_training", "worker_count"), workers)
        if servers:
            draft.put(("distributed_training", "parameter_server_count"), servers)
        else:
            draft.note(
                "changed", "distribution tensorflow without parameter servers → backend: multi_worker_mirrored", where
            )
    elif kind:
        draft.note(
            "dropped",
            f"distribution {kind}: tftrain trains TensorFlow with mpi, parameter_server or multi_worker_mirrored",
            where,
        )
    elif isinstance(nodes, int) and nodes > 1:
        draft.todo(
            "node_count",
            f"instance_count {nodes} without a distribution: choose distributed_training.backend",
            where=where,
        )
    if isinstance(resources.get("shm_size"), str):
        draft.put("shm_size", resources["shm_size"])
    compute = job.get("compute")
    target = compute.removeprefix("azureml:") if isinstance(compute, str) else None
    gpu = draft.get("use_gpu") is True or is_gpu_vm(resources.get("instance_type"))
    compute_note(draft, target, ctx.where("compute"), gpu)
