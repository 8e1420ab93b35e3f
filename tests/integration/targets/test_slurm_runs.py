"""The slurm target on a real two-node Slurm (scripts/slurm-up: slurmctld, slurmd n1 and n2 with two
fake GPUs each): one process, MPI ranks over both nodes (mpirun in the allocation) and through
srun's pmix, parameter servers and multi-worker mirrored with TF_CONFIG from the allocation, the
GPU request in the script and in the job, each rank's log streamed live into the run."""

from __future__ import annotations

import json
import re

import pytest
from slurming import queued, run_example_on_slurm, show_job, slurm_manifest, submitted

pytestmark = pytest.mark.integration

WHERE = """\
import os, subprocess, sys, time
print("node", os.environ.get("SLURMD_NODENAME"), "rank", os.environ.get("TFTRAIN_RANK"),
      "gpus", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
print("job", subprocess.run(["scontrol", "-o", "show", "job", os.environ["SLURM_JOB_ID"]], capture_output=True, text=True).stdout, flush=True)
for step in range(1, 4):
    print(f"epoch {step}: loss={1 / step:.3f}", flush=True)
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.txt", "w").write("w")
"""


def test_one_process_with_a_gpu_runs_as_a_slurm_job(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project,
        WHERE,
        "use_gpu: true\nmax_run_duration_seconds: 120\nmetrics:\n  regex:\n    loss: 'epoch (?P<step>\\d+):"
        " loss=(?P<value>[0-9.]+)'\n",
    )
    plan = cli("plan", "-f", str(path))
    assert plan.returncode == 0, plan.stderr
    assert "#SBATCH --gres=gpu:1" in plan.stdout and "#SBATCH --nodes=1" in plan.stdout, plan.stdout
    assert "#SBATCH --time=4" in plan.stdout  # 120 s + the 10 s grace + a minute, in whole minutes
    assert "#SBATCH --job-name=tftrain-$RUN_ID" in plan.stdout and "#SBATCH --signal=TERM@" in plan.stdout
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    run = home / "runs/demo-1"
    log = (run / "workdir/logs/0.log").read_text()
    assert re.search(r"^node n[12] rank 0 gpus 0$", log, re.M), log  # the GPU Slurm assigned, no other
    assert "TresPerNode=gres:gpu:1" in log, log  # scontrol show job: the job asked one GPU per node
    assert "#SBATCH --gres=gpu:1" in (run / "launch/slurm.sh").read_text()  # the script is kept with the run
    assert [
        p["value"] for p in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if p["name"] == "loss"
    ] == [1.0, 0.5, 0.333]
    assert (run / "workdir/outputs/model/weights.txt").exists()
    (job,) = submitted(result.stdout + result.stderr)
    assert "JobState=COMPLETED" in show_job(job)
    assert queued() == []


MPI = """\
import os
from mpi4py import MPI
world = MPI.COMM_WORLD
total = world.allreduce(world.Get_rank())
print(f"rank {world.Get_rank()} of {world.Get_size()} on {os.environ.get('SLURMD_NODENAME')} sum {total}", flush=True)
"""


def test_mpi_ranks_over_two_nodes_through_mpirun(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project, MPI, "node_count: 2\ndistributed_training:\n  backend: mpi\n", slurm="    mpi: mpirun\n"
    )
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    logs = home / "runs/demo-1/workdir/logs"
    lines = [(logs / f"{rank}.log").read_text().strip() for rank in (0, 1)]
    assert re.fullmatch(r"rank 0 of 2 on n\d sum 1", lines[0]) and re.fullmatch(
        r"rank 1 of 2 on n\d sum 1", lines[1]
    ), lines
    assert {lines[0].split()[-3], lines[1].split()[-3]} == {"n1", "n2"}, lines  # one rank per node
    assert "[1] rank 1 of 2" in result.stdout
    assert "mpirun --allow-run-as-root --tag-output -np 2" in (home / "runs/demo-1/launch/slurm.sh").read_text()


def test_mpi_ranks_through_srun_pmix(project, cli, home, slurm_cluster):
    """pmix on one node (over both: test_slurm_pmix_nodes.py)."""
    path = slurm_manifest(project, MPI, "distributed_training:\n  backend: mpi\n  process_count_per_node: 2\n")
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "srun --mpi=pmix" in (home / "runs/demo-1/launch/slurm.sh").read_text()
    logs = home / "runs/demo-1/workdir/logs"
    assert [(logs / f"{rank}.log").read_text().split()[:4] for rank in (0, 1)] == [
        ["rank", "0", "of", "2"],
        ["rank", "1", "of", "2"],
    ]


def test_parameter_servers_across_the_nodes(repo, cli, home, tmp_path, slurm_cluster):
    result, logs = run_example_on_slurm(repo, tmp_path, cli, home, "parameter-server", "")
    assert "chief: coordinating 2 workers" in (logs / "0.log").read_text()
    for rank, role in ((1, "worker:0"), (2, "worker:1"), (3, "ps:0")):
        assert f"task {role} in cluster" in (logs / f"{rank}.log").read_text()
    ports = sorted((home / "runs/parameter-server-1/launch/ports").iterdir())
    assert len(ports) == 4  # each task's host:port, found on its node
    assert "registered model parameter-server@v1" in result.stdout
    # the parameter server, which never ends on its own, was stopped with the job: Slurm records it CANCELLED
    # or FAILED (the server's SIGTERM), tftrain's stop, no disagreement
    assert "disagrees with tftrain" not in result.stdout + result.stderr, result.stdout[-3000:]
    assert queued() == []


def test_multi_worker_mirrored_over_two_nodes(repo, cli, home, tmp_path, slurm_cluster):
    result, logs = run_example_on_slurm(repo, tmp_path, cli, home, "multi-worker", "node_count: 2\n")
    assert "worker 0 of 2 replicas" in (logs / "0.log").read_text()
    assert "worker 1 of 2 replicas" in (logs / "1.log").read_text()
    script = (home / "runs/multi-worker-1/launch/slurm.sh").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    tasks = json.loads((home / "runs/multi-worker-1/launch/tasks.json").read_text())
    assert tasks["tf_config"] is True and tasks["cluster_roles"] == ["worker"]
    assert "registered model multi-worker@v1" in result.stdout


def test_secrets_reach_the_tasks_through_slurm_not_a_file(project, cli, home, slurm_cluster, monkeypatch):
    monkeypatch.setenv("SLURM_TEST_TOKEN", "t0ken-4-slurm")
    script = (
        "import os\nprint('token length', len(os.environ['SLURM_TEST_TOKEN']), os.environ['SLURM_TEST_TOKEN'],"
        " flush=True)\n"
    )
    path = slurm_manifest(project, script, "secrets: [SLURM_TEST_TOKEN]\n")
    result = cli("run", "-f", str(path), timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    run = home / "runs/demo-1"
    assert "token length 13 ***" in (run / "workdir/logs/0.log").read_text()  # there, and masked in the log
    for name in ("slurm.sh", "tasks.json"):
        assert "t0ken-4-slurm" not in (run / "launch" / name).read_text(), name
    assert not (run / "launch/rank-0.log").exists()  # srun's raw output, unmasked, is gone once followed
    assert (run / "launch").stat().st_mode & 0o077 == 0  # and while the job ran, only its owner could read it
