"""Rules that span several keys, checked after each key is valid on its own.

Each rule returns (location, message) pairs so the error can point at the YAML line.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from runner.manifest.model import (
    InputRef,
    Manifest,
    MpiTraining,
    MultiWorkerMirroredTraining,
    ParameterServerTraining,
    ResumeRef,
)
from runner.frameworks import HOROVOD_FRAMEWORKS, horovod_compatible
from runner.manifest.yamlfile import Location

Problem = tuple[Location, str]


def migrate_deprecated(manifest: Manifest) -> tuple[Manifest, list[Problem], list[Problem]]:
    """Rewrite distributed_backend / worker_count / parameter_server_count into distributed_training."""
    warnings: list[Problem] = []
    errors: list[Problem] = []
    backend = manifest.distributed_backend
    workers, servers = manifest.worker_count, manifest.parameter_server_count
    if backend is None and workers is None and servers is None:
        return manifest, warnings, errors
    if manifest.distributed_training is not None:
        key = "distributed_backend" if backend else ("worker_count" if workers else "parameter_server_count")
        errors.append(((key,), "deprecated key conflicts with distributed_training; keep only distributed_training"))
        return manifest, warnings, errors
    if backend is None:
        key = "worker_count" if workers is not None else "parameter_server_count"
        if (workers or 1) > 1 or (servers or 1) > 1:
            errors.append(((key,), "a distributed backend is required: set distributed_training.backend"))
        else:
            warnings.append(((key,), f"{key} is deprecated and ignored without a distributed backend; remove it"))
        return manifest.model_copy(update={"worker_count": None, "parameter_server_count": None}), warnings, errors
    if backend == "mpi":
        per_node = manifest.process_count_per_node or 1
        training = MpiTraining(backend="mpi", process_count_per_node=per_node)
        instead = f"distributed_training: {{backend: mpi, process_count_per_node: {per_node}}}"
    else:
        training = ParameterServerTraining(
            backend="parameter_server", worker_count=workers or 1, parameter_server_count=servers or 1
        )
        instead = (
            "distributed_training: {backend: parameter_server, "
            f"worker_count: {training.worker_count}, parameter_server_count: {training.parameter_server_count}}}"
        )
    warnings.append((("distributed_backend",), f"distributed_backend is deprecated; write instead: {instead}"))
    for key, value in (("worker_count", workers), ("parameter_server_count", servers)):
        if value is not None:
            warnings.append(((key,), f"{key} is deprecated; it moves into distributed_training ({instead})"))
    migrated = manifest.model_copy(
        update={
            "distributed_training": training,
            "distributed_backend": None,
            "worker_count": None,
            "parameter_server_count": None,
        }
    )
    return migrated, warnings, errors


def check_rules(manifest: Manifest, base_dir: Path) -> list[Problem]:
    return [
        *_references(manifest),
        *_directories(manifest),
        *_distribution(manifest),
        *_docker(manifest),
        *_files(manifest, base_dir),
    ]


def slots_per_node(manifest: Manifest) -> int:
    if manifest.compute.slots_per_node:
        return manifest.compute.slots_per_node
    if effective_target(manifest) == "pool":
        return 1 << 20  # the pool's placement knows each host's slots; it checks them
    return os.cpu_count() or 1


def _references(manifest: Manifest) -> list[Problem]:
    problems = []
    for flag, value in manifest.script_params.items():
        if isinstance(value, InputRef) and value.input not in manifest.inputs:
            known = ", ".join(sorted(manifest.inputs)) or "none defined"
            problems.append(
                (("script_params", flag, "input"), f"input {value.input!r} is not in inputs ({known})")
            )
        if isinstance(value, ResumeRef) and not manifest.resume_from:
            problems.append((("script_params", flag), "references resume_from, which is not set"))
    return problems


def _directories(manifest: Manifest) -> list[Problem]:
    problems = []
    if manifest.outputs_dir == manifest.logs_dir:
        problems.append((("logs_dir",), "logs_dir must differ from outputs_dir"))
    model_path = posixpath.normpath(manifest.model.path)
    outputs = manifest.outputs_dir
    if posixpath.isabs(model_path) or not (model_path == outputs or model_path.startswith(outputs + "/")):
        problems.append((("model", "path"), f"{manifest.model.path!r} must stay inside outputs_dir {outputs!r}"))
    return problems


def _distribution(manifest: Manifest) -> list[Problem]:
    training = manifest.distributed_training
    problems: list[Problem] = []
    if training is None:
        for key in ("node_count", "process_count_per_node"):
            if (getattr(manifest, key) or 1) > 1:
                problems.append(
                    ((key,), f"{key} > 1 needs a distributed backend: set distributed_training.backend")
                )
        return problems
    slots = slots_per_node(manifest)
    capacity = manifest.node_count * slots
    where = f"node_count ({manifest.node_count}) × slots per node ({slots})"
    if isinstance(training, MpiTraining):
        top = manifest.process_count_per_node
        if top is not None and top != training.process_count_per_node:
            problems.append(
                (("process_count_per_node",), "differs from distributed_training.process_count_per_node; keep one")
            )
        if training.process_count_per_node > slots:
            problems.append(
                (
                    ("distributed_training", "process_count_per_node"),
                    f"{training.process_count_per_node} processes per node exceed the {slots} slots per node "
                    "(set compute.slots_per_node if the node has more)",
                )
            )
        if not horovod_compatible(manifest.framework_version):
            problems.append(
                (
                    ("framework_version",),
                    f"Horovod (backend: mpi) builds against TensorFlow {', '.join(HOROVOD_FRAMEWORKS)} only, "
                    f"not {manifest.framework_version}",
                )
            )
    elif isinstance(training, ParameterServerTraining):
        extra = int(training.chief) + int(training.evaluator)
        tasks = training.worker_count + training.parameter_server_count + extra
        if tasks > capacity:
            with_extra = f" + chief/evaluator ({extra})" if extra else ""
            problems.append(
                (
                    ("distributed_training", "worker_count"),
                    f"worker_count + parameter_server_count{with_extra} = {tasks} tasks exceed {where} = {capacity}",
                )
            )
    elif isinstance(training, MultiWorkerMirroredTraining) and training.worker_count > capacity:
        problems.append(
            (("distributed_training", "worker_count"), f"worker_count ({training.worker_count}) exceeds {where}")
        )
    if manifest.process_count_per_node and not isinstance(training, MpiTraining):
        if manifest.process_count_per_node > 1:
            problems.append(
                (("process_count_per_node",), f"applies to the mpi backend, not {training.backend}")
            )
    return problems


def _docker(manifest: Manifest) -> list[Problem]:
    target = manifest.compute.target
    if manifest.use_docker and target not in (None, "docker", "pool", "kubernetes"):
        return [(("use_docker",), f"use_docker: true conflicts with compute.target: {target}")]
    if manifest.custom_docker_image and effective_target(manifest) == "local":
        return [(("custom_docker_image",), "needs use_docker: true (or compute.target: docker)")]
    return []


def effective_target(manifest: Manifest) -> str:
    if manifest.compute.target:
        return manifest.compute.target
    return "docker" if manifest.use_docker else "local"


def _files(manifest: Manifest, base_dir: Path) -> list[Problem]:
    source = (base_dir / manifest.source_directory).resolve()
    if not source.is_dir():
        return [(("source_directory",), f"directory {source} does not exist")]
    problems = []
    script = (source / manifest.entry_script).resolve()
    if not script.is_relative_to(source):
        problems.append((("entry_script",), f"{manifest.entry_script!r} leaves source_directory {source}"))
    elif not script.is_file():
        problems.append((("entry_script",), f"{manifest.entry_script!r} not found in source_directory {source}"))
    for key in ("pip_requirements_file", "conda_dependencies_file"):
        name = getattr(manifest, key)
        if name and not (source / name).is_file():
            problems.append(((key,), f"{name!r} not found in source_directory {source}"))
    for name, spec in manifest.inputs.items():
        if "://" not in spec.source and not (base_dir / spec.source).exists():
            problems.append((("inputs", name, "source"), f"local path {spec.source!r} does not exist"))
    return problems
