"""An Azure ML v2 command job (YAML: command, code, environment, distribution, inputs…) → a Draft."""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from runner.errors import ManifestError
from runner.importer import hyperdrive
from runner.importer.context import ImportContext, relative
from runner.importer.datainputs import datastore_source, put_input
from runner.importer.draft import Draft, compute_note, curated_environment, finish, is_gpu_vm, model_name
from runner.importer.mapping import (
    bool_as_text,
    group_flags,
    put_count,
    put_distribution,
    put_positional,
    put_preemptible,
    put_size,
    put_variables,
)
from runner.importer.packages import conda_file_packages, environment_file
from runner.manifest.document import YamlDocument
from runner.manifest.loading import load_yaml

REFERENCE = re.compile(r"\$\{\{\s*(inputs|outputs|search_space)\.([A-Za-z0-9_.-]+)\s*\}\}")
OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
BACKENDS = {"mpi": "mpi", "tensorflow": "parameter_server"}  # distribution.type → what put_distribution takes
DATA_TYPES = ("uri_folder", "uri_file", "mltable", "custom_model", "mlflow_model", "triton_model")
QUIET = {"$schema", "type", "description", "tags", "display_name", "name", "experiment_name", "code", "command",
         "environment", "environment_variables", "distribution", "resources", "inputs", "outputs", "compute", "limits",
         "queue_settings"}  # fmt: skip
SPOT_TIERS = {"spot", "low_priority", "lowpriority"}  # queue_settings.job_tier; low_priority is AmlCompute's tier name


@dataclass
class V2Import(ImportContext):
    doc: YamlDocument = field(kw_only=True)  # its path as seen from the manifest
    search_space: dict = field(default_factory=dict)  # a sweep's trial: the sweep's search_space
    swept: dict[str, str] = field(default_factory=dict)  # search_space name → the flag it is the value of

    def where(self, *loc: Any) -> str:
        return self.doc.where(loc)


def import_yaml(path: Path, manifest_dir: Path) -> Draft:
    """`manifest_dir`: resolved."""
    doc = load_yaml(path)  # errors name the file as given; the manifest and report, as seen from the manifest
    resolved = path.resolve()
    label = relative(resolved, manifest_dir)
    doc = YamlDocument(PurePosixPath(label), doc.data, doc.lines)
    job = doc.data
    draft, sweep = Draft(origin=f"command job at {label}"), None
    if isinstance(job, dict) and job.get("type") == "sweep" and isinstance(job.get("trial"), dict):
        sweep, doc = doc, hyperdrive.trial_of(doc)
        job, draft = doc.data, Draft(origin=f"sweep job at {label}")
    if not isinstance(job, dict) or not isinstance(job.get("command"), str):
        raise ManifestError(f"{path}: not an Azure ML command job (no command: key), nor a Python file")
    space = sweep.data.get("search_space") if sweep is not None else None
    ctx = V2Import(draft, manifest_dir, resolved.parent, doc=doc, search_space=space if isinstance(space, dict) else {})
    kind = "command" if sweep is None else "sweep"
    draft.header = [f"Imported by `tftrain import azureml` from the Azure ML {kind} job {label}."]
    for key in ("experiment_name", "display_name", "name"):
        name = model_name(job[key]) if isinstance(job.get(key), str) else None
        if name:
            draft.put("name", name)
            break
    folder = job.get("code", ".")
    folder = folder[len("file:") :] if isinstance(folder, str) and folder.startswith("file:") else folder
    if isinstance(folder, str) and "://" not in folder and not folder.startswith("azureml:"):
        draft.put("source_directory", ctx.relative((ctx.input_dir / folder).resolve()))
    else:
        draft.todo("source_directory", f"code: {folder!r} is not a local folder", ".", ctx.where("code"))
    _command(ctx, job)
    _environment(ctx, job.get("environment"))
    put_variables(ctx, job.get("environment_variables"), "environment_variables")
    _resources(ctx, job)
    _queue_settings(ctx, job.get("queue_settings"), sweep is not None)
    limits = job.get("limits")
    if isinstance(limits, dict) and "timeout" in limits:
        put_count(ctx, "max_run_duration_seconds", limits["timeout"], "limits", placeholder=None)
    for key in job:
        if key not in QUIET:
            draft.note("dropped", f"{key}: no equivalent in tftrain", ctx.where(key))
    if sweep is not None:
        hyperdrive.from_sweep_job(dataclasses.replace(ctx, doc=sweep), ctx.swept)
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
    for flag, values in group_flags(tokens[1:]):
        if flag is None:
            put_positional(ctx, values[0], where, known=not REFERENCE.search(values[0]))
            continue
        whole = REFERENCE.fullmatch(values[0]) if len(values) == 1 else None
        if whole and whole[1] == "search_space" and whole[2] in ctx.search_space:
            ctx.swept[whole[2]] = flag  # sampled by the sweep: section, for each trial
            continue
        converted = [_value(ctx, flag, value, inputs, used) for value in values]
        if any(value is _TODO for value in converted):
            sweep = "search_space." in " ".join(values)
            why = "a reference tftrain cannot pass in part"
            if sweep:
                why = "a sweep parameter in part of a value: tftrain sweeps whole values"
            draft.todo(("script_params", flag), f"{' '.join(values)!r}: {why}", where=where)
        else:
            draft.put(
                ("script_params", flag), True if not converted else converted[0] if len(converted) == 1 else converted
            )
    for name, spec in inputs.items():
        if name not in used and _is_input_spec(spec):
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
        if _is_input_spec(spec):
            return {"input": _input(ctx, whole[2], spec)}
        value = spec.get("default", spec.get("value")) if isinstance(spec, dict) else spec
        if isinstance(value, bool):
            return bool_as_text(ctx, flag, value)
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


def _is_input_spec(spec: Any) -> bool:
    return isinstance(spec, dict) and (spec.get("type") in DATA_TYPES or "path" in spec)


def _input(ctx: V2Import, name: str, spec: dict) -> str:
    where, path = ctx.where("inputs", name), str(spec.get("path", ""))
    mode = "mount" if str(spec.get("mode", "ro_mount")).endswith("mount") else "download"
    source, message = path, ""
    if path.startswith("azureml://") and (match := re.search(r"datastores/([^/]+)/paths/(.*)$", path)):
        source, message = datastore_source(match[1], match[2].strip("/"))
    elif path.startswith("azureml:"):
        asset = path.removeprefix("azureml:").split("@")[0].split(":")[0]
        source, message = f"s3://TODO/{asset}", f"was data asset {path!r}; copy its files to S3/https or a local path"
    elif path.startswith(("wasbs://", "abfss://", "adl://")):
        source, message = f"s3://TODO/{name}", f"was {path!r}; copy it to S3/https or a local path"
    elif "://" not in path:
        found = (ctx.input_dir / path.removeprefix("file:")).resolve()
        if found.exists():
            source = ctx.relative(found)
        else:
            source, message = f"s3://TODO/{name}", f"was local {path!r} (not found); give the data's path"
    put_input(ctx.draft, name, source, message, mode, where)
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
    draft = ctx.draft
    resources = job["resources"] if isinstance(job.get("resources"), dict) else {}
    distribution = job["distribution"] if isinstance(job.get("distribution"), dict) else {}
    nodes, kind = resources.get("instance_count"), str(distribution.get("type", "")).lower()
    put_distribution(
        ctx,
        BACKENDS.get(kind, f"distribution {kind}") if kind else None,
        "distribution" if distribution else "resources",
        nodes,
        per_node=distribution.get("process_count_per_instance", 1),
        workers=distribution.get("worker_count", 1 if nodes is None else nodes),
        servers=distribution.get("parameter_server_count", 0),
    )
    put_size(ctx, "shm_size", resources.get("shm_size"), "resources")
    compute = job.get("compute")
    target = compute.removeprefix("azureml:") if isinstance(compute, str) else None
    gpu = draft.get("use_gpu") is True or is_gpu_vm(resources.get("instance_type"))
    compute_note(draft, target, ctx.where("compute"), gpu)


def _queue_settings(ctx: V2Import, settings: Any, sweep: bool) -> None:
    """job_tier spot: machines taken away, as v1's vm_priority='lowpriority'. A sweep's trials are
    not retried (docs/retry.md): there the report says what happens instead."""
    if settings is None:
        return
    if not isinstance(settings, dict):
        ctx.draft.note(
            "dropped",
            f"queue_settings: {settings!r} is not a mapping (job_tier, priority)",
            ctx.where("queue_settings"),
        )
        return
    for key in settings:
        if key != "job_tier":
            ctx.draft.note(
                "dropped", f"queue_settings.{key}: no equivalent in tftrain", ctx.where("queue_settings", key)
            )
    if "job_tier" not in settings:
        return
    tier, where = settings["job_tier"], ctx.where("queue_settings", "job_tier")
    if isinstance(tier, str) and tier.lower() in SPOT_TIERS and sweep:
        ctx.draft.note(
            "dropped",
            f"queue_settings.job_tier={tier!r}: a sweep does not retry its trials (a preempted trial ends "
            "Failed; `tftrain sweep resume` runs stopped trials again; see docs/retry.md)",
            where,
        )
    elif isinstance(tier, str) and tier.lower() in SPOT_TIERS:
        put_preemptible(ctx, f"queue_settings.job_tier={tier!r}", where)
    else:
        ctx.draft.note("info", f"queue_settings.job_tier={tier!r}: runs are not retried unless retry: is set", where)
