"""Slurm's accounting on the test cluster (scripts/slurm-up: slurmdbd on a MariaDB of its own): a run's
usage comes from sacct's record of its job, and run.json says so."""

from __future__ import annotations

import json
import subprocess

import pytest
from slurming import slurm_manifest, submitted

pytestmark = pytest.mark.integration

SLEEPY = """\
import time
time.sleep(3)
print("done", flush=True)
"""


def sacct(job: str) -> str:
    argv = ["sacct", "-j", job, "-X", "-n", "-P", "--format=State,ExitCode,ElapsedRaw,AllocTRES"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()


def test_usage_comes_from_slurm_accounting(project, cli, home, slurm_cluster):
    path = slurm_manifest(project, SLEEPY, "use_gpu: true\n")
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    (job,) = submitted(result.stdout + result.stderr)
    state, exit_code, elapsed, tres = sacct(job).split("|")
    assert (state, exit_code) == ("COMPLETED", "0:0") and "gres/gpu=1" in tres, tres
    usage = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]
    allocation = usage["allocation"]
    assert allocation == {
        "source": "sacct",
        "job_id": job,
        "state": "COMPLETED",
        "exit_code": "0:0",
        "elapsed_seconds": float(elapsed),
        "cpus": allocation["cpus"],
        "gpus": 1,  # as Slurm allocated it
    }, allocation
    assert allocation["cpus"] >= 1 and float(elapsed) >= 3
    assert usage["wall_seconds"] == float(elapsed)  # Slurm's figure, not tftrain's clock
    line = f"usage from Slurm accounting (sacct): job {job} COMPLETED exit 0:0, {float(elapsed):g} s, cpu="
    assert line in result.stdout + result.stderr
    assert "Slurm accounting (sacct) gives no usable record" not in result.stdout + result.stderr
