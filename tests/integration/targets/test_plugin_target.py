"""Adding a target is one folder and one catalog row, even outside tftrain: the `fake` target of
tests/plugins/tftrain_fake_target is installed the way a plugin would be (a distribution whose
entry point of the group `tftrain.targets` registers its row), and tftrain plans, runs, routes and
reaps it with no edit under runner/."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, TFTRAIN

pytestmark = pytest.mark.integration

PLUGIN = REPO / "tests" / "plugins"
MANIFEST = 'model: {gate: "off", register: false}\ncompute: {target: fake}\n'


@pytest.fixture
def installed(tmp_path, home, monkeypatch):
    """The plugin as a distribution on the path: its metadata and entry point, its package."""
    site = tmp_path / "site"
    info = site / "tftrain_fake_target-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tftrain-fake-target\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tftrain.targets]\nfake = tftrain_fake_target:register_target\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(PLUGIN)]))
    return home


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, timeout=300, **kwargs)


def test_nothing_under_runner_names_the_plugin():
    named = [
        path
        for path in (REPO / "runner").rglob("*.py")
        if "fake" in path.read_text() and "tftrain_fake_target" in path.read_text()
    ]
    assert named == []


def test_the_plugin_target_plans_runs_and_routes(installed, project):
    manifest = project("import os\nprint('trained on', os.environ['TFTRAIN_RUN_ID'])\n", MANIFEST)
    plan = run("plan", "-f", str(manifest))
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "job (fake scheduler):" in plan.stdout and '"job": "fake-' in plan.stdout
    labels = run("github", "runs-on", "-f", str(manifest))
    assert labels.returncode == 0, labels.stderr
    assert ["self-hosted", "linux", "fake-cluster"] in [
        json.loads(line) for line in labels.stdout.splitlines() if line.startswith("[")
    ]
    done = run("run", "-f", str(manifest))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "fake: submitted job fake-demo-1" in done.stdout
    assert "trained on demo-1" in (installed / "runs/demo-1/workdir/logs/0.log").read_text()
    assert not list((installed / "fake-cluster").iterdir())  # the job ended with the run
    flagged = run("run", "-f", str(manifest), "--target", "fak")
    assert (
        flagged.returncode == 2
        and "'fak' is not a target: one of local, docker, pool, kubernetes, slurm, fake; did you mean 'fake'?"
        in flagged.stderr
    )


def test_a_lost_run_on_the_plugin_target_is_reaped_by_its_own_method(installed, project):
    manifest = project("import time\nprint('training', flush=True)\ntime.sleep(600)\n", MANIFEST)
    first = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(manifest)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    job = installed / "fake-cluster" / "demo-1.json"
    deadline = time.monotonic() + 120
    while not (job.exists() and "training" in _log(installed)):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    allocation = json.loads(job.read_text())["allocation"]
    os.killpg(first.pid, signal.SIGKILL)  # tftrain is gone; the job's allocation and training are not
    first.wait()
    listed = run("runs")
    assert listed.returncode == 0, listed.stderr
    told = listed.stdout + listed.stderr
    assert re.search(rf"run demo-1 marked Failed .*cancelled fake job fake-demo-1 \(allocation {allocation}\)", told), (
        told
    )
    assert not job.exists()
    time.sleep(0.2)
    assert not Path(f"/proc/{allocation}").exists() or "Z" in Path(f"/proc/{allocation}/stat").read_text().split()[2]


def test_without_the_plugin_its_target_is_one_line(home, project):
    refused = run("validate", "-f", str(project("print(1)\n", MANIFEST)))
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert (
        "compute.target: 'fake' is not one of 'local', 'docker', 'pool', 'kubernetes' or 'slurm'"
        in refused.stdout + refused.stderr
    )


def _log(home: Path) -> str:
    log = home / "runs/demo-1/workdir/logs/0.log"
    return log.read_text() if log.exists() else ""
