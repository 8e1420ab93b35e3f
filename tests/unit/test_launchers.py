from __future__ import annotations

import json
import socket

import pytest

from runner.errors import PlanError
from runner.manifest import load_manifest
from runner.plan import PlanContext, build_plan
from runner.rundir import RuntimePaths

RUNTIME = RuntimePaths("/run/workdir", "/run/workdir/outputs", "/run/workdir/logs", "/run/metrics.d", "/run/py", {}, None, "/run/launch")


def plan_for(project, manifest: str, env: dict | None = None):
    loaded = load_manifest(project(manifest="compute:\n  slots_per_node: 4\n" + manifest))
    ctx = PlanContext(loaded.manifest, "local", "/venv/bin/python", RUNTIME, {"TFTRAIN_RUN_ID": "r-1", **(env or {})}, ("--epochs", "3"))
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


def test_horovodrun_launcher(project):
    plan = plan_for(project, MPI + "  launcher: horovodrun\n")
    assert list(plan.driver.argv[:5]) == ["horovodrun", "-np", "4", "-H", "localhost:4"]


def test_parameter_server_tf_config(project):
    plan = plan_for(project, "node_count: 2\ndistributed_training:\n  backend: parameter_server\n  worker_count: 2\n  parameter_server_count: 1\n")
    assert [(t.role, t.index, t.rank) for t in plan.tasks] == [("chief", 0, 0), ("worker", 0, 1), ("worker", 1, 2), ("ps", 0, 3)]
    configs = [json.loads(t.env["TF_CONFIG"]) for t in plan.tasks]
    cluster = configs[0]["cluster"]
    assert list(cluster) == ["chief", "ps", "worker"]  # sorted, as Kubeflow writes it
    assert len(cluster["worker"]) == 2 and len({a for addrs in cluster.values() for a in addrs}) == 4
    assert all(c["cluster"] == cluster and c["environment"] == "cloud" for c in configs)
    assert configs[2]["task"] == {"type": "worker", "index": 1}
    assert plan.success_policy == "chief" and plan.driver is None
    assert plan.tasks[0].env["TF_NUM_INTEROP_THREADS"] == "2"


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
    with pytest.raises(PlanError, match="metrics.ranks: 5 is not a rank of this job"):
        plan_for(project, MPI + "metrics:\n  ranks: [5]\n")
