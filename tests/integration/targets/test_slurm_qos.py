"""A job over a limit of its QoS (scripts/slurm-up's `small`: one GPU, ten minutes) is refused by
`sbatch --test-only` before the run is recorded: one line naming the limit, nothing submitted."""

from __future__ import annotations

import subprocess

import pytest
from slurming import slurm_manifest

from runner.targets.slurm.target import home_comment

pytestmark = pytest.mark.integration


def homes_jobs() -> str:
    """Every job slurmctld knows, in the queue or ended (it remembers them MinJobAge, 300 s): id and comment."""
    every = ["squeue", "-h", "--me", "-t", "all", "-o", "%i %k"]
    return subprocess.run(every, capture_output=True, text=True, timeout=30).stdout


TWO_GPUS = "use_gpu: true\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 2\n"


@pytest.mark.parametrize(
    ("extra", "limit", "figure"),
    [
        (TWO_GPUS, "QOSMaxGRESPerJob", "MaxTRES=gres/gpu=1"),
        ("max_run_duration_seconds: 3600\n", "QOSMaxWallDurationPerJobLimit", "MaxWall=00:10:00"),
    ],
)
def test_a_job_over_its_qos_is_refused_before_it_is_submitted(project, cli, home, slurm_cluster, extra, limit, figure):
    path = slurm_manifest(project, "print('never')\n", extra, slurm="    qos: small\n")
    result = cli("run", "-f", str(path), timeout=120)
    assert result.returncode == 19, result.stdout[-3000:] + result.stderr  # PlacementError
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"compute.slurm.qos: the job is over a limit of its QoS 'small' ({limit}; the QoS allows " in lines[0]
    assert figure in lines[0] and "nothing was submitted" in lines[0], lines[0]
    assert "submitted:" not in result.stdout and home_comment(home) not in homes_jobs(), homes_jobs()
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # no run was recorded


def test_a_job_within_its_qos_runs(project, cli, home, slurm_cluster):
    path = slurm_manifest(project, "print('within')\n", "use_gpu: true\n", slurm="    qos: small\n")
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "within" in (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert home_comment(home) in homes_jobs()  # what the refused ones are looked for by
