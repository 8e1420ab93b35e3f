"""What the slurm target refuses, each in one line and an exit code of its own, before anything is
submitted (sbatch --test-only asks the real cluster): no sbatch, slurmctld not answering, a
partition the cluster does not have, a job the cluster can never run, extra_args that set what
tftrain sets, Docker-only keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TFTRAIN
from slurming import queued, slurm_manifest

pytestmark = pytest.mark.integration

SCRIPT = "print('never')\n"


def refused(path: Path, home: Path, code: int, words: str, env: dict | None = None) -> str:
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    assert result.returncode == code, result.stdout[-2000:] + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tftrain: error: ") and words in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # nothing recorded
    assert queued() == []  # nothing submitted
    return lines[0]


def test_no_sbatch_on_path(project, home, slurm_cluster):
    line = refused(
        slurm_manifest(project, SCRIPT), home, 7, "needs sbatch on PATH", {"PATH": str(Path(sys.executable).parent)}
    )
    assert "login node" in line


def test_slurmctld_not_answering(project, home, slurm_cluster, tmp_path):
    conf = tmp_path / "slurm.conf"  # the cluster's, with a port where no slurmctld listens
    text = slurm_cluster.read_text().replace("SlurmctldPort=16817", "SlurmctldPort=1")
    conf.write_text(text + "MessageTimeout=2\n")
    refused(slurm_manifest(project, SCRIPT), home, 14, "slurmctld does not answer", {"SLURM_CONF": str(conf)})


def test_unknown_partition(project, home, slurm_cluster):
    line = refused(slurm_manifest(project, SCRIPT, slurm="    partition: nope\n"), home, 3, "compute.slurm.partition")
    assert "invalid partition" in line.lower()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("node_count: 3\ndistributed_training:\n  backend: mpi\n", "can never run on the cluster"),  # two nodes
        (
            "use_gpu: true\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 3\n",
            "can never run on the cluster",
        ),  # two GPUs a node
    ],
    ids=["three-nodes", "three-gpus-a-node"],
)
def test_a_request_the_cluster_can_never_satisfy(project, home, slurm_cluster, extra, words):
    refused(slurm_manifest(project, SCRIPT, extra), home, 19, words)


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ('"--nodes=5"', "sets --nodes, which tftrain sets itself"),
        ('"-J other"', "sets --job-name"),
        ('"--exclusive\\n#SBATCH --nodes=9"', "line break"),
        ('"exclusive"', "is not an sbatch option"),
    ],
)
def test_extra_args_that_would_override_tftrain(project, home, slurm_cluster, item, words):
    line = refused(
        slurm_manifest(project, SCRIPT, slurm=f"    extra_args: [{item}]\n"), home, 3, "compute.slurm.extra_args"
    )
    assert words in line


def test_extra_args_reach_the_job(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project,
        "import os\nprint('exclusive', os.environ.get('SLURM_JOB_NAME'), flush=True)\n",
        slurm="    extra_args: [--exclusive, --mem=100]\n",
    )
    result = cli("run", "-f", str(path), timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    script = (home / "runs/demo-1/launch/slurm.sh").read_text()
    assert "#SBATCH --exclusive\n#SBATCH --mem=100\n" in script


def test_docker_keys_have_no_place_on_slurm(project, home, slurm_cluster):
    line = refused(
        slurm_manifest(project, SCRIPT, "custom_docker_image: python:3.11\n"), home, 7, "custom_docker_image"
    )
    assert "Apptainer and enroot" in line and "not in Debian 12" in line
    refused(
        slurm_manifest(project, SCRIPT, "use_docker: true\n"),
        home,
        3,
        "use_docker: true conflicts with compute.target: slurm",
    )


def test_a_home_slurm_cannot_name(project, tmp_path, slurm_cluster, monkeypatch):
    home = tmp_path / "my%jhome"
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(slurm_manifest(project, SCRIPT))], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 7, result.stderr
    assert "holds a space or %" in result.stderr and "Traceback" not in result.stderr
    assert queued() == []
