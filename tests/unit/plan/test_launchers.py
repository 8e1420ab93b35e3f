from __future__ import annotations

import io
import json
import socket

import pytest
from builders import PYTHON, RUNTIME

from runner.errors import ManifestError, PlanError
from runner.manifest import load_manifest
from runner.plan.argv import script_args
from runner.plan.launchers import build_plan
from runner.plan.launchers.capacity import check_capacity
from runner.plan.model import PlanContext, Role, SuccessPolicy, TaskSpec
from runner.shared.machine import cpu_count
from runner.telemetry.logger import Logger


def plan_for(project, manifest: str, env: dict | None = None):
    loaded = load_manifest(project(manifest="compute:\n  slots_per_node: 4\n" + manifest))
    ctx = PlanContext(
        loaded.manifest,
        "local",
        "/venv/bin/python",
        RUNTIME,
        {"TFTRAIN_RUN_ID": "r-1", **(env or {})},
        ("--epochs", "3"),
    )
    return build_plan(ctx)


MPI = "node_count: 2\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 2\n"


def test_mpi_command_follows_horovodrun(project):
    plan = plan_for(project, MPI, {"SECRET_TOKEN": "s3cr3t", "CUDA_VISIBLE_DEVICES": "0"})
    argv = list(plan.driver.argv)
    assert argv[:7] == ["mpirun", "--allow-run-as-root", "--tag-output", "-np", "4", "-H", "localhost:4"]
    for flag in ("-bind-to", "none", "-map-by", "slot", "pml", "ob1", "btl", "^openib"):
        assert flag in argv
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert "SECRET_TOKEN" in exported and "TFTRAIN_RUN_ID" in exported and "TF_USE_LEGACY_KERAS" in exported
    assert "CUDA_VISIBLE_DEVICES" not in exported
    assert "s3cr3t" not in " ".join(argv)  # values travel in the environment, never in argv
    assert argv[-4:] == ["/venv/bin/python", "train.py", "--epochs", "3"]
    assert [t.rank for t in plan.tasks] == [0, 1, 2, 3]
    assert plan.tasks[0].env["TFTRAIN_METRICS_FILE"] == "/run/metrics.d/{rank}.jsonl"


def test_mpi_hostfile_ssh_port_and_interface(project):
    plan = plan_for(project, MPI + "  hostfile: true\n  ssh_port: 2222\n  network_interface: eth1\n")
    argv = list(plan.driver.argv)
    assert plan.files == {"hostfile": "localhost slots=4\n"}
    assert argv[argv.index("--hostfile") + 1] == "/run/launch/hostfile" and "-H" not in argv
    assert argv[argv.index("plm_rsh_args") + 1] == "-p 2222"
    assert argv[argv.index("btl_tcp_if_include") + 1] == "eth1"
    assert plan.driver.env["NCCL_SOCKET_IFNAME"] == "eth1" and "NCCL_SOCKET_IFNAME" in argv


def test_mpi_tasks_own_their_environment(project):
    plan = plan_for(project, MPI + "  network_interface: eth1\n")
    specs = [*plan.tasks, plan.driver]
    assert all(spec.env["NCCL_SOCKET_IFNAME"] == "eth1" for spec in specs)  # every rank gets mpirun's environment
    assert len({id(spec.env) for spec in specs}) == len(specs)
    plan.tasks[0].env["EDITED"] = "1"
    assert all("EDITED" not in spec.env for spec in specs[1:])


def test_a_task_spec_keeps_the_environment_it_was_built_with():
    env = {"A": "1"}
    task = TaskSpec("main", 0, 0, "localhost", ("python", "train.py"), env, "/run/workdir")
    env["A"] = "2"
    assert task.env == {"A": "1"}


def test_horovodrun_launcher(project):
    plan = plan_for(project, MPI + "  launcher: horovodrun\n")
    assert list(plan.driver.argv[:5]) == ["horovodrun", "-np", "4", "-H", "localhost:4"]


def test_parameter_server_tf_config(project):
    plan = plan_for(
        project,
        "node_count: 2\ndistributed_training:\n  backend: parameter_server\n  worker_count: 2\n "
        " parameter_server_count: 1\n",
    )
    assert [(t.role, t.index, t.rank) for t in plan.tasks] == [
        ("chief", 0, 0),
        ("worker", 0, 1),
        ("worker", 1, 2),
        ("ps", 0, 3),
    ]
    configs = [json.loads(t.env["TF_CONFIG"]) for t in plan.tasks]
    cluster = configs[0]["cluster"]
    assert list(cluster) == ["chief", "ps", "worker"]  # sorted, as Kubeflow writes it
    assert len(cluster["worker"]) == 2 and len({a for addrs in cluster.values() for a in addrs}) == 4
    assert all(c["cluster"] == cluster and c["environment"] == "cloud" for c in configs)
    assert configs[2]["task"] == {"type": "worker", "index": 1}
    assert plan.success_policy == "chief" and plan.driver is None
    assert plan.tasks[0].env["TF_NUM_INTEROP_THREADS"] == "2"


def test_roles_and_the_success_policy_are_typed_and_written_as_their_words(project):
    plan = plan_for(
        project,
        "node_count: 2\ndistributed_training:\n  backend: parameter_server\n  worker_count: 1\n "
        " parameter_server_count: 1\n",
    )
    assert [t.role for t in plan.tasks] == [
        Role.CHIEF,
        Role.WORKER,
        Role.PS,
    ] and plan.success_policy is SuccessPolicy.CHIEF
    assert all(type(t.role) is Role for t in plan.tasks) and [t.label for t in plan.tasks] == [
        "chief 0",
        "worker 0",
        "ps 0",
    ]
    document = json.loads(json.dumps(plan.to_dict()))
    assert document["success_policy"] == "chief" and [t["role"] for t in document["tasks"]] == ["chief", "worker", "ps"]
    single = plan_for(project, "")
    assert (single.tasks[0].role, single.tasks[0].label, single.success_policy) == (Role.MAIN, "0", SuccessPolicy.MAIN)
    mpi = plan_for(project, MPI)
    assert {t.role for t in mpi.tasks} == {Role.RANK} and mpi.driver.role is Role.LAUNCHER


def test_evaluator_in_or_out_of_the_cluster(project):
    base = "node_count: 2\ndistributed_training:\n  backend: parameter_server\n  worker_count: 1\n  evaluator: true\n"
    plan = plan_for(project, base)
    evaluator = json.loads(plan.tasks[-1].env["TF_CONFIG"])
    assert evaluator["task"] == {"type": "evaluator", "index": 0} and "evaluator" not in evaluator["cluster"]
    plan = plan_for(project, base + "  evaluator_in_cluster: true\n")
    assert "evaluator" in json.loads(plan.tasks[0].env["TF_CONFIG"])["cluster"]


def test_multi_worker_mirrored_has_workers_only(project):
    plan = plan_for(project, "distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 3\n")
    cluster = json.loads(plan.tasks[0].env["TF_CONFIG"])["cluster"]
    assert list(cluster) == ["worker"] and len(cluster["worker"]) == 3
    assert plan.success_policy == "all_workers"


def test_ports_in_use_are_refused_at_planning(project):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        manifest = f"distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 2\n  base_port: {port}\n"
        with pytest.raises(PlanError, match=f"port {port} on 127.0.0.1 is already in use"):
            plan_for(project, manifest)


def test_metrics_ranks_must_exist(project):
    """Validation refuses a rank the job does not have; the plan checks again (a manifest from a recorded run)."""
    with pytest.raises(ManifestError, match=r":11: metrics.ranks\[0\]: 5 is not a rank of this job \(ranks 0–3\)"):
        plan_for(project, MPI + "metrics:\n  ranks: [5]\n")
    mpi = load_manifest(project(manifest=MPI)).manifest
    single = mpi.model_copy(update={"distributed_training": None, "node_count": 1})
    for manifest in (mpi, single):
        manifest = manifest.model_copy(update={"metrics": manifest.metrics.model_copy(update={"ranks": [5]})})
        with pytest.raises(PlanError, match="metrics.ranks: 5 is not a rank of this job"):
            build_plan(PlanContext(manifest, "local", "/venv/bin/python", RUNTIME, {}, ()))


INJECTION = "import os; open('INJECTED', 'w')"
LAUNCHERS = {
    "single": "",
    "mpirun": MPI,
    "horovodrun": MPI + "  launcher: horovodrun\n",
    "parameter_server": (
        "node_count: 2\ndistributed_training:\n  backend: parameter_server\n  worker_count: 2\n "
        " parameter_server_count: 1\n"
    ),
    "multi_worker_mirrored": "distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 2\n",
}


def option_named_plan(project, training: str, script: str, target: str = "local"):
    path = project(
        manifest="compute:\n  slots_per_node: 4\n" + training + f"script_params:\n  {json.dumps(INJECTION)}: true\n"
    )
    path.write_text(path.read_text().replace("entry_script: train.py", f"entry_script: {json.dumps(script)}"))
    (path.parent / "src" / script).write_text("print('a script named like an option')\n")
    loaded = load_manifest(path)
    ctx = PlanContext(
        loaded.manifest, target, PYTHON, RUNTIME, {"TFTRAIN_RUN_ID": "r-1"}, tuple(script_args(loaded.manifest))
    )
    return loaded, build_plan(ctx)


def script_after_python(argv) -> str:
    argv = list(argv)
    return argv[argv.index(PYTHON) + 1]


@pytest.mark.parametrize("training", list(LAUNCHERS.values()), ids=list(LAUNCHERS))
@pytest.mark.parametrize("script", ["-c", "-", "-m", "--version", "-Werror"])
def test_the_entry_script_is_never_an_interpreter_option(project, training, script):
    """`entry_script: -c` with a parameter of Python code must not run `python -c CODE`: every
    launcher passes the script as a path (`./-c`), the one position after python it controls."""
    loaded, plan = option_named_plan(project, training, script)
    argvs = [task.argv for task in plan.processes] + [task.argv for task in plan.tasks]
    for argv in argvs:
        assert script_after_python(argv) == f"./{script}", argv
        assert argv[argv.index(PYTHON) + 2] == INJECTION  # the parameter comes after the script: the script's argv[1]


@pytest.mark.parametrize("training", [LAUNCHERS["mpirun"], LAUNCHERS["parameter_server"]], ids=["mpijob", "tfjob"])
def test_kubernetes_pods_run_the_script_as_a_path(project, training):
    from runner.targets.kubernetes.jobs import render

    loaded, plan = option_named_plan(project, training, "-c", target="kubernetes")
    commands = [
        container["command"] + container["args"]
        for document in render(plan, loaded.manifest, "r-1")
        for spec in (
            document.get("spec", {}).get("tfReplicaSpecs") or document.get("spec", {}).get("mpiReplicaSpecs") or {}
        ).values()
        for container in spec["template"]["spec"]["containers"]
    ]
    with_python = [command for command in commands if PYTHON in command]
    assert with_python and all(script_after_python(command) == "./-c" for command in with_python)


def checked_at_run_start(plan, manifest) -> str:
    """What check_capacity says about `plan` on this machine (its warnings)."""
    stream = io.StringIO()
    logger = Logger(stream)
    check_capacity(plan, manifest, logger, cuda_visible_devices=None)
    logger.flush()
    return stream.getvalue()


def test_more_processes_than_cpus_is_a_warning_at_run_start(project):
    """Validation does not count this machine's CPUs; the run does, and only warns: they share them."""
    cpus = cpu_count()
    path = project(manifest=f"distributed_training:\n  backend: mpi\n  process_count_per_node: {cpus + 1}\n")
    loaded = load_manifest(path)
    for target, warned in (("local", True), ("docker", True), ("pool", False), ("kubernetes", False)):
        plan = build_plan(PlanContext(loaded.manifest, target, PYTHON, RUNTIME, {}, ()))
        said = checked_at_run_start(plan, loaded.manifest)
        assert (f"warning: {cpus + 1} training processes on this machine's {cpus} CPUs" in said) is warned, (
            target,
            said,
        )
