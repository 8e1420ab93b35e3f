"""The slurm target's default environment on the real two-node cluster (scripts/slurm-up): no
user_managed, so tftrain builds the curated virtualenv once in its cache (a filesystem both nodes
see) and every node's task runs in it. The set is the one tests/integration/environments builds
(framework 2.18 with six, in the lasting cache): no other TensorFlow virtualenv for CI to build."""

from __future__ import annotations

import re

import pytest
from slurming import queued, show_job, submitted

from runner.environments.virtualenv import COMPLETE, env_spec
from runner.manifest import load_manifest

pytestmark = pytest.mark.integration

WHICH = """\
import os, sys
import tensorflow as tf
print("node", os.environ.get("SLURMD_NODENAME"), "rank", os.environ.get("TFTRAIN_RANK"), "python", sys.executable, "tf", tf.__version__, flush=True)
"""

CURATED = """\
model: {gate: "off"}
framework_version: '2.18'
pip_packages: [six]
node_count: 2
distributed_training:
  backend: multi_worker_mirrored
  worker_count: 2
compute:
  target: slurm
  slots_per_node: 1
max_run_duration_seconds: 300
"""


def test_both_nodes_run_in_the_curated_virtualenv_built_once(project, cli, home, lasting_cache, slurm_cluster):
    path = project(WHICH, CURATED)
    loaded = load_manifest(path)
    spec = env_spec(loaded.manifest, loaded.source_dir)  # lasting_cache is TFTRAIN_CACHE_DIR by now
    assert spec.key is not None
    python = lasting_cache / "envs" / spec.key / "bin" / "python"

    first = cli("run", "-f", str(path), timeout=900)  # builds it where the cache is new, else reuses it
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    built = (lasting_cache / "envs" / spec.key / COMPLETE).stat()
    second = cli("run", "-f", str(path), timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert "(reused)" in second.stdout and "building" not in second.stdout, second.stdout[-3000:]
    assert (lasting_cache / "envs" / spec.key / COMPLETE).stat().st_mtime_ns == built.st_mtime_ns  # not rebuilt

    for run, result in (("demo-1", first), ("demo-2", second)):
        nodes = set()
        for rank in (0, 1):
            log = (home / "runs" / run / "workdir/logs" / f"{rank}.log").read_text()
            found = re.search(rf"^node (n[12]) rank {rank} python (\S+) tf (\S+)$", log, re.M)
            assert found, log
            assert found[2] == str(python), log  # tftrain's cached virtualenv, not its own interpreter
            assert found[3].startswith("2.18."), log
            nodes.add(found[1])
        assert nodes == {"n1", "n2"}, run  # one task on each node
        (job,) = submitted(result.stdout + result.stderr)
        assert "JobState=COMPLETED" in show_job(job)
    assert queued() == []
