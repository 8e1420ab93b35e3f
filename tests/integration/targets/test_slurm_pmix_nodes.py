"""MPI ranks through srun --mpi=pmix over both nodes of the test cluster: scripts/slurm-up gives each
slurmd a TmpFS and a TMPDIR of its own (two slurmd on one host would collide in /tmp, where pmix
keeps a directory per step and Open MPI its shared memory)."""

from __future__ import annotations

import re

import pytest
from slurming import slurm_manifest

pytestmark = pytest.mark.integration

MPI = """\
import os
from mpi4py import MPI
world = MPI.COMM_WORLD
total = world.allreduce(world.Get_rank())
print(f"rank {world.Get_rank()} of {world.Get_size()} on {os.environ.get('SLURMD_NODENAME')} sum {total}", flush=True)
"""


def test_mpi_ranks_over_two_nodes_through_srun_pmix(project, cli, home, slurm_cluster):
    path = slurm_manifest(
        project,
        MPI,
        "node_count: 2\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 2\n",
        slurm="    mpi: pmix\n",
    )
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "srun --mpi=pmix" in (home / "runs/demo-1/launch/slurm.sh").read_text()
    logs = home / "runs/demo-1/workdir/logs"
    # each log's first line (slurmstepd may add that it ended the step once every rank reported)
    lines = [(logs / f"{rank}.log").read_text().splitlines()[0] for rank in range(4)]
    for rank, line in enumerate(lines):
        assert re.fullmatch(rf"rank {rank} of 4 on n[12] sum 6", line), lines  # the allreduce crossed the nodes
    assert {line.split()[-3] for line in lines} == {"n1", "n2"}, lines
