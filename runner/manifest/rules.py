"""Rules that span several keys, checked after each key is valid on its own.

Each rule returns (location, message) pairs so the error can point at the YAML line.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from runner.frameworks.releases import HOROVOD_FRAMEWORKS, horovod_compatible
from runner.manifest.cost_rules import check_cost
from runner.manifest.document import Location
from runner.manifest.evaluation import check_evaluation
from runner.manifest.fields import ENV_NAME_PATTERN, INPUT_NAME_PATTERN, MAX_TASKS, InputRef, ResumeRef
from runner.manifest.image_rules import check_images
from runner.manifest.model import (
    Manifest,
    MpiTraining,
    MultiWorkerMirroredTraining,
    ParameterServerTraining,
    effective_target,
)
from runner.manifest.replay import check_replay
from runner.manifest.scoring_rules import check_scoring
from runner.manifest.signing import check_signing
from runner.manifest.slurm import check_slurm
from runner.manifest.sourcepaths import regular_file_problem, text_file_problem, through_link
from runner.shared.catalog import bare_here, on_this_machine, on_this_machine_names, row_of
from runner.shared.refs import resume_ref_problem

Problem = tuple[Location, str]
MAX_ARGUMENT = 128 << 10  # Linux's MAX_ARG_STRLEN: one argv or environment string


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
        *_names(manifest),
        *_packages(manifest),
        *_arguments(manifest),
        *_directories(manifest),
        *_gate(manifest),
        *_distribution(manifest),
        *_metrics(manifest),
        *_docker(manifest),
        *_checkpoints(manifest),
        *check_images(manifest),
        *check_signing(manifest),
        *check_slurm(manifest),
        *check_cost(manifest),
        *_files(manifest, base_dir),
        *_sweep(manifest),
        *check_scoring(manifest, base_dir),
    ]


def _sweep(manifest: Manifest) -> list[Problem]:
    if manifest.sweep is None:  # the sweep's rules and models are imported for a sweep alone
        return []
    from runner.manifest.sweep_rules import check_sweep

    return check_sweep(manifest)


def process_count(manifest: Manifest) -> int:
    """How many training processes the job runs (ranks 0 … N-1), wherever it runs."""
    training = manifest.distributed_training
    if isinstance(training, MpiTraining):
        return manifest.node_count * training.process_count_per_node
    if isinstance(training, ParameterServerTraining):
        return training.worker_count + training.parameter_server_count + int(training.chief) + int(training.evaluator)
    if isinstance(training, MultiWorkerMirroredTraining):
        return training.worker_count
    return 1


def _references(manifest: Manifest) -> list[Problem]:
    problems = []
    for flag, value in manifest.script_params.items():
        if isinstance(value, InputRef) and value.input not in manifest.inputs:
            known = ", ".join(sorted(manifest.inputs)) or "none defined"
            problems.append((("script_params", flag, "input"), f"input {value.input!r} is not in inputs ({known})"))
        if isinstance(value, ResumeRef) and not manifest.resume_from:
            problems.append((("script_params", flag), "references resume_from, which is not set"))
    if problem := resume_ref_problem(manifest.resume_from or ""):
        problems.append((("resume_from",), problem))
    return problems


def _names(manifest: Manifest) -> list[Problem]:
    """Names that become environment variables (and, for inputs, mount points)."""
    problems: list[Problem] = []
    for key in manifest.environment_variables:
        if not re.fullmatch(ENV_NAME_PATTERN, key):
            problems.append((("environment_variables", key), f"{key!r} is not a valid environment variable name"))
    for index, key in enumerate(manifest.secrets):
        if not re.fullmatch(ENV_NAME_PATTERN, key):
            problems.append((("secrets", index), f"{key!r} is not a valid environment variable name"))
    variables: dict[str, str] = {}
    for name in manifest.inputs:
        if not re.fullmatch(INPUT_NAME_PATTERN, name):
            problems.append(
                (("inputs", name), f"{name!r} is not a valid input name (up to 64 letters, digits, _ and -)")
            )
            continue
        variable = input_variable(name)
        if variable in variables:
            problems.append((("inputs", name), f"{name!r} and {variables[variable]!r} both become ${variable}"))
        variables[variable] = name
    return problems


def _packages(manifest: Manifest) -> list[Problem]:
    """Package names go to pip and conda as arguments and requirements lines: never an option
    (`-r /etc/hostname`, `--index-url …`) and never a second line."""
    problems: list[Problem] = []
    for key, file_key in (("pip_packages", "pip_requirements_file"), ("conda_packages", "conda_dependencies_file")):
        for index, package in enumerate(getattr(manifest, key)):
            if not package.strip() or package.lstrip().startswith("-") or not package.isprintable():
                problems.append(((key, index), f"{package!r} is not a package (options belong in {file_key})"))
    return problems


def input_variable(name: str) -> str:
    return f"TFTRAIN_INPUT_{name.upper().replace('-', '_')}"


def _arguments(manifest: Manifest) -> list[Problem]:
    """What the kernel refuses at spawn time (one argument or variable over 128 KiB) is refused here."""
    problems: list[Problem] = []
    for flag, value in manifest.script_params.items():
        texts = [flag] + [str(item) for item in (value if isinstance(value, list) else [value])]
        if any(len(text.encode("utf-8", "replace")) >= MAX_ARGUMENT for text in texts):
            problems.append(
                (("script_params", flag), f"an argument longer than {MAX_ARGUMENT >> 10} KiB cannot be passed")
            )
    for key, value in manifest.environment_variables.items():
        if len(f"{key}={value}".encode("utf-8", "replace")) >= MAX_ARGUMENT:
            problems.append(
                (("environment_variables", key), f"a variable longer than {MAX_ARGUMENT >> 10} KiB cannot be passed")
            )
    return problems


def _directories(manifest: Manifest) -> list[Problem]:
    problems = []
    if manifest.outputs_dir == manifest.logs_dir:
        problems.append((("logs_dir",), "logs_dir must differ from outputs_dir"))
    model_path = posixpath.normpath(manifest.model.path)
    outputs = manifest.outputs_dir
    if posixpath.isabs(model_path) or not (model_path == outputs or model_path.startswith(outputs + "/")):
        problems.append((("model", "path"), f"{manifest.model.path!r} must stay inside outputs_dir {outputs!r}"))
    for key in ("outputs_dir", "logs_dir"):
        directory = getattr(manifest, key)
        if manifest.entry_script.startswith(directory + "/"):
            problems.append(
                (
                    ("entry_script",),
                    f"{manifest.entry_script!r} is inside {key} {directory!r}, which is not copied into the run",
                )
            )
    return problems


SAMPLE_SUFFIXES = (".npy", ".npz", ".json")


def _gate(manifest: Manifest) -> list[Problem]:
    """model.sample_input is one of the forms the gate reads; what the gate makes needs the gate."""
    spec = manifest.model
    problems = []
    if spec.sample_input is not None and posixpath.splitext(spec.sample_input)[1].lower() not in SAMPLE_SUFFIXES:
        problems.append((("model", "sample_input"), f"{spec.sample_input!r} must be a .npy, .npz or .json file"))
    if spec.gate == "off":
        for key, used in (("export", bool(spec.export)), ("sample_input", spec.sample_input is not None)):
            if used:
                problems.append(
                    (("model", key), f"model.{key} needs the gate: remove it or set model.gate to auto or required")
                )
    return problems


def _distribution(manifest: Manifest) -> list[Problem]:
    """The counts must fit; against compute.slots_per_node only when it is set, so that validation
    gives the same answer on every machine (the run checks the machine it lands on)."""
    training = manifest.distributed_training
    problems: list[Problem] = []
    if training is None:
        for key in ("node_count", "process_count_per_node"):
            if (getattr(manifest, key) or 1) > 1:
                problems.append(((key,), f"{key} > 1 needs a distributed backend: set distributed_training.backend"))
        return problems
    slots = manifest.compute.slots_per_node
    capacity = manifest.node_count * (slots or 0)
    where = f"node_count ({manifest.node_count}) × compute.slots_per_node ({slots}) = {capacity}"
    if isinstance(training, MpiTraining):
        top = manifest.process_count_per_node
        if top is not None and top != training.process_count_per_node:
            problems.append(
                (("process_count_per_node",), "differs from distributed_training.process_count_per_node; keep one")
            )
        if slots and training.process_count_per_node > slots:
            problems.append(
                (
                    ("distributed_training", "process_count_per_node"),
                    (
                        f"{training.process_count_per_node} processes per node exceed the {slots} slots per node "
                        "(compute.slots_per_node)"
                    ),
                )
            )
        if not horovod_compatible(manifest.framework_version):
            problems.append(
                (
                    ("framework_version",),
                    (
                        f"Horovod (backend: mpi) builds against TensorFlow {', '.join(HOROVOD_FRAMEWORKS)} only, "
                        f"not {manifest.framework_version}"
                    ),
                )
            )
    elif isinstance(training, ParameterServerTraining):
        # Azure ML's rule, as its TensorFlow estimator states it: the chief and evaluator are not counted
        tasks = training.worker_count + training.parameter_server_count
        if slots and tasks > capacity:
            problems.append(
                (
                    ("distributed_training", "worker_count"),
                    f"worker_count + parameter_server_count = {tasks} exceed {where}",
                )
            )
    elif isinstance(training, MultiWorkerMirroredTraining) and slots and training.worker_count > capacity:
        problems.append(
            (("distributed_training", "worker_count"), f"worker_count ({training.worker_count}) exceeds {where}")
        )
    if manifest.process_count_per_node and not isinstance(training, MpiTraining):
        if manifest.process_count_per_node > 1:
            problems.append((("process_count_per_node",), f"applies to the mpi backend, not {training.backend}"))
    count = process_count(manifest)
    if count > MAX_TASKS:
        problems.append((("distributed_training",), f"{count} processes; at most {MAX_TASKS}"))
    base_port = getattr(training, "base_port", None)
    if base_port is not None and base_port + count - 1 > 65535:
        problems.append(
            (("distributed_training", "base_port"), f"{count} tasks from port {base_port} run past port 65535")
        )
    return problems


def _metrics(manifest: Manifest) -> list[Problem]:
    count = process_count(manifest)
    return [
        (("metrics", "ranks", index), f"{rank} is not a rank of this job (ranks 0–{count - 1})")
        for index, rank in enumerate(manifest.metrics.ranks)
        if rank >= count
    ]


def _docker(manifest: Manifest) -> list[Problem]:
    target = manifest.compute.target
    if manifest.use_docker and target is not None and not row_of(target).containers:
        return [(("use_docker",), f"use_docker: true conflicts with compute.target: {target}")]
    if manifest.custom_docker_image and bare_here(effective_target(manifest)):
        return [(("custom_docker_image",), "needs use_docker: true (or compute.target: docker)")]
    return []


def _checkpoints(manifest: Manifest) -> list[Problem]:
    checkpoints = manifest.checkpoints
    if checkpoints is None:
        return []
    problems = []
    outputs = manifest.outputs_dir
    if not checkpoints.dir.startswith(outputs + "/"):
        problems.append(
            (("checkpoints", "dir"), f"{checkpoints.dir!r} must be a directory inside outputs_dir {outputs!r}")
        )
    target = effective_target(manifest)
    if not on_this_machine(target):  # the sync reads the run's workdir on this machine
        problems.append(
            (("checkpoints",), f"checkpoint sync needs the {' or '.join(on_this_machine_names())} target, not {target}")
        )
    return problems


def _files(manifest: Manifest, base_dir: Path) -> list[Problem]:
    """Paths inside source_directory stay inside it, symlinks resolved. source_directory itself and
    local `inputs` (data) may be anywhere; so may resume_from and compute.pool_file (not copied)."""
    try:
        source = (base_dir / manifest.source_directory).resolve()
        is_dir = source.is_dir()
    except (OSError, RuntimeError) as exc:
        return [(("source_directory",), f"{manifest.source_directory!r} cannot be resolved ({exc})")]
    if not is_dir:
        return [(("source_directory",), f"directory {source} does not exist")]
    problems = check_evaluation(manifest.evaluation, manifest.outputs_dir, source, manifest.environment_variables)
    model = manifest.model
    problems += check_replay(model.replay, source, model.register_model, model.gate)
    script = regular_file_problem(source, manifest.entry_script)
    if script:
        problems.append((("entry_script",), script))
    for key in ("pip_requirements_file", "conda_dependencies_file"):
        name = getattr(manifest, key)
        problem = name and text_file_problem(source, name)
        if problem:
            problems.append(((key,), problem))
    sample = manifest.model.sample_input
    problem = (
        sample and posixpath.splitext(sample)[1].lower() in SAMPLE_SUFFIXES and regular_file_problem(source, sample)
    )
    if problem:
        problems.append((("model", "sample_input"), problem))
    for key in ("outputs_dir", "logs_dir"):
        problem = through_link(source, getattr(manifest, key))
        if problem:
            problems.append(((key,), problem))
    for name, spec in manifest.inputs.items():
        if isinstance(spec.source, str) and "://" not in spec.source and not _exists(base_dir / spec.source):
            problems.append((("inputs", name, "source"), f"local path {spec.source!r} does not exist"))
    return problems


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
