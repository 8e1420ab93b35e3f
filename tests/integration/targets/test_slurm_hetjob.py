"""compute.slurm.heterogeneous on the real two-node cluster: the parameter-server example as one
Slurm heterogeneous job, its chief and parameter server on partition `cpu` (node n1), its workers on
partition `gpu` (node n2), TF_CONFIG across both components (scripts/slurm-up makes the partitions)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from slurming import queued, show_job, submitted

pytestmark = pytest.mark.integration

HETEROGENEOUS = "compute:\n  target: slurm\n  slurm: {heterogeneous: true, ps_partition: cpu, partition: gpu}\n"


def example(repo, tmp_path, extra: str = ""):
    copy = tmp_path / "parameter-server"
    shutil.copytree(repo / "examples" / "parameter-server", copy)
    manifest = copy / "tftrain.yml"
    manifest.write_text(manifest.read_text().replace("compute:\n", HETEROGENEOUS) + "user_managed: true\n" + extra)
    return manifest


def test_a_parameter_server_job_as_one_heterogeneous_job(repo, cli, home, tmp_path, slurm_cluster):
    result = cli("run", "-f", str(example(repo, tmp_path)), timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    (job,) = submitted(out)
    logs = home / "runs/parameter-server-1/workdir/logs"
    assert "chief: coordinating 2 workers" in (logs / "0.log").read_text()
    for rank, role in ((1, "worker:0"), (2, "worker:1"), (3, "ps:0")):
        assert f"task {role} in cluster" in (logs / f"{rank}.log").read_text()
    launch = home / "runs/parameter-server-1/launch"
    script = (launch / "slurm.sh").read_text()
    head, tail = script.split("#SBATCH hetjob\n")
    assert "#SBATCH --partition=cpu" in head and "#SBATCH --ntasks=2" in head
    assert "#SBATCH --partition=gpu" in tail and "srun --het-group=1 " in tail
    assert json.loads((launch / "tasks.json").read_text())["components"] == [[0, 3], [1, 2]]
    shown = show_job(job)  # one record per component
    components = dict(re.findall(r"HetJobOffset=(\d) .*? Partition=(\w+) ", shown))
    assert components == {"0": "cpu", "1": "gpu"}, shown
    assert re.findall(r" NodeList=(\w+)", shown) == ["n1", "n2"], shown  # the chief and server on n1, workers on n2
    assert "usage from Slurm accounting (sacct): job" in out and "cpu=4" in out, out[-2000:]
    assert "registered model parameter-server@v1" in result.stdout
    assert not [line for line in queued() if "parameter-server-1" in line]


def test_a_heterogeneous_job_no_partition_can_hold_is_refused_before_submitting(
    repo, cli, home, tmp_path, slurm_cluster
):
    manifest = example(repo, tmp_path)
    text = manifest.read_text().replace("worker_count: 2", "worker_count: 3")  # three workers: n2 has two CPUs
    manifest.write_text(text)
    result = cli("run", "-f", str(manifest), timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in out and not submitted(out), out[-3000:]
    assert "Requested node configuration is not available" in out, out[-3000:]
