"""The SDK v1 job's shape: distribution (MPI/Horovod, parameter server), compute, the model."""

from __future__ import annotations

import posixpath
from typing import Any

from runner.importer.draft import compute_note, is_gpu_vm
from runner.importer.interp import read_script
from runner.importer.mapping import PREEMPTIBLE_LABEL, put_distribution, put_preemptible
from runner.importer.source import read_python
from runner.importer.values import Obj, Unknown

HANDLED = {
    "node_count", "process_count_per_node", "distributed_training", "distributed_job_config", "distributed_backend",
    "worker_count", "parameter_server_count", "compute_target", "vm_size", "run_config", "vm_priority",
}  # fmt: skip
BACKENDS = {
    "MpiConfiguration": "mpi", "Mpi": "mpi",
    "TensorflowConfiguration": "parameter_server", "ParameterServer": "parameter_server",
}  # fmt: skip
FRAMEWORK_NAMES = {"TENSORFLOW": "TensorFlow", "KERAS": "TensorFlow", "ONNX": "Onnx", "SCIKITLEARN": "ScikitLearn"}


def distribution(ctx, job: Obj) -> None:
    attrs = job.attrs
    run_config = attrs.get("run_config") if isinstance(attrs.get("run_config"), Obj) else Obj("run_config", job.line)
    training = attrs.get("distributed_training", attrs.get("distributed_job_config"))
    if training is None:  # RunConfiguration(communicator='Mpi') with run_config.mpi.process_count_per_node
        communicator = str(run_config.attrs.get("communicator", "")).lower()
        via = {"mpi": "MpiConfiguration", "parameterserver": "TensorflowConfiguration"}.get(communicator)
        part = run_config.attrs.get("mpi" if communicator == "mpi" else "tensorflow")
        training = Obj(via, job.line, dict(part.attrs) if isinstance(part, Obj) else {}) if via else None
    legacy = attrs.get("distributed_backend")
    if training is None and isinstance(legacy, str) and legacy.lower() in ("mpi", "ps"):
        training = Obj("MpiConfiguration" if legacy.lower() == "mpi" else "ParameterServer", job.line)
        ctx.draft.note(
            "changed",
            f"distributed_backend={legacy!r} (deprecated) → distributed_training",
            ctx.at(job, "distributed_backend"),
        )
    elif legacy is not None and training is None:
        ctx.unresolved("distributed_training", legacy, job.line)
        return
    if training is not None and not isinstance(training, Obj):
        ctx.unresolved("distributed_training", training, job.line)
        return
    own = training.attrs if training is not None else {}
    kind = None if training is None else BACKENDS.get(training.kind, training.kind)
    nodes = attrs.get("node_count", own.get("node_count", run_config.attrs.get("node_count")))
    per_node = own.get("process_count_per_node", attrs.get("process_count_per_node", 1))
    workers = own.get("worker_count", attrs.get("worker_count", 1))
    servers = own.get("parameter_server_count", attrs.get("parameter_server_count", 1))
    asked = job.via == "ScriptRunConfig" and isinstance(workers, int) and isinstance(servers, int)
    if kind == "parameter_server" and nodes is None and asked:
        nodes = workers + servers  # what ScriptRunConfig asked Azure ML for
    put_distribution(ctx, kind, job.line, nodes, per_node, workers, servers)


def compute(ctx, job: Obj) -> None:
    attrs = job.attrs
    run_config = attrs.get("run_config")
    target = attrs.get("compute_target", run_config.attrs.get("target") if isinstance(run_config, Obj) else None)
    vm_size = attrs.get("vm_size")
    priority, priority_at = attrs.get("vm_priority"), ctx.at(job, "vm_priority")
    name: Any = target
    if isinstance(target, Obj):
        name = target.attrs.get("name")
        config = target.attrs.get("provisioning_configuration")
        if isinstance(config, Obj):
            vm_size = config.attrs.get("vm_size", vm_size)
            if priority is None and "vm_priority" in config.attrs:
                priority, priority_at = config.attrs["vm_priority"], ctx.at(config, "vm_priority")
    if priority is not None:
        vm_priority(ctx, priority, priority_at)
    if isinstance(name, Unknown):
        name = ctx.segment(name.node) + " (not known statically)"
    use_gpu, gpu_vm = ctx.draft.get("use_gpu") is True, is_gpu_vm(vm_size)
    if gpu_vm and not use_gpu:
        ctx.draft.note("info", f"vm_size {vm_size!r} has GPUs but use_gpu is not set: the run uses the CPU build")
    compute_note(ctx.draft, name, ctx.at(job, "compute_target"), use_gpu or gpu_vm)


def vm_priority(ctx, priority: Any, where: str) -> None:
    """Low-priority machines are taken away: runs retry from their checkpoint on preemptible runners."""
    if not isinstance(priority, str):
        ctx.draft.note(
            "todo",
            f"vm_priority={ctx.shown(priority)} is not known statically: for preemptible runners "
            f"set retry: and compute.runner_labels: [{PREEMPTIBLE_LABEL}]",
            where,
        )
        return
    if priority.lower() != "lowpriority":
        ctx.draft.note("info", f"vm_priority={priority!r}: runs are not retried unless retry: is set", where)
        return
    put_preemptible(ctx, f"vm_priority={priority!r}", where)


def model(ctx) -> Any:
    """model.path (and framework) from run.register_model / Model.register; the model's name."""
    registrations = list(ctx.interp.registrations)
    registrations += _in_entry_script(ctx)
    if not registrations:
        return None
    first, where = registrations[0], ctx.where(registrations[0].line)
    if first.attrs.get("_where"):
        where = first.attrs["_where"]
    path = first.attrs.get("model_path")
    outputs = ctx.draft.get("outputs_dir", "outputs")
    if isinstance(path, str) and first.via == "register_model":
        normal = posixpath.normpath(path)
        if normal == outputs or normal.startswith(outputs + "/"):
            ctx.draft.put(("model", "path"), normal)
        else:
            ctx.draft.todo(
                ("model", "path"),
                f"was register_model(model_path={path!r}); save the model under {outputs}/",
                "outputs/model",
                where,
            )
    elif isinstance(path, str):
        ctx.draft.todo(
            ("model", "path"),
            f"was Model.register(model_path={path!r}), a local path",
            "outputs/model",
            where,
            report=(
                f"Model.register(model_path={path!r}) took a file from this machine; tftrain registers the run's "
                "model.path: save the model there"
            ),
        )
    elif path is not None:
        ctx.unresolved(("model", "path"), path, first.line, placeholder="outputs/model")
    framework = first.attrs.get("model_framework")
    if isinstance(framework, Unknown):
        framework = FRAMEWORK_NAMES.get(ctx.segment(framework.node).rsplit(".", 1)[-1].upper())
    if isinstance(framework, str):
        ctx.draft.put(("model", "framework"), framework)
    version = first.attrs.get("model_framework_version")
    if isinstance(version, str):
        ctx.draft.put(("model", "framework_version"), version)
    for other in registrations[1:]:
        ctx.draft.note(
            "dropped",
            "another model registration: tftrain registers one model per run",
            other.attrs.get("_where") or ctx.where(other.line),
        )
    return first.attrs.get("model_name")


def _in_entry_script(ctx) -> list[Obj]:
    """register_model calls in the training script itself (read, never run), when it is there."""
    folder, script = ctx.source_dir(), ctx.draft.get("entry_script")
    if folder is None or not isinstance(script, str) or not (folder / script).is_file():
        return []
    path = folder / script
    try:
        source = read_python(path, ctx.relative(path))
        interp = read_script(source)
    except Exception:  # noqa: BLE001 - the entry script is the user's to fix; the import goes on
        ctx.draft.note("info", f"entry_script {script!r} could not be parsed; its model registration was not read")
        return []
    for registration in interp.registrations:
        registration.attrs["_where"] = source.where(registration.line)
    return interp.registrations
