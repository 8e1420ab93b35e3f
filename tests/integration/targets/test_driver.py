"""One scenario table, every target: the same small scripts run through `tftrain run` on local,
docker and pool, and each ends the same way: its exit code, its status in run.json and in
`tftrain runs show`, what is kept in the run directory, and nothing of it left running.

A `Driver` hides only what differs between targets: the manifest's target keys, what "still
running" means (a process, a container labelled with the run), and how a training vanishes from
under the run (SIGKILL from outside, its container removed, its host killed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import BASE_IMAGE, TFTRAIN, tftrain
from watching import alive, leftover_containers, wait_for

from runner.errors import TrainingCanceled, TrainingFailed, TrainingTimedOut

# the docker and pool targets' Docker fixtures are asked for inside `driver` (request.getfixturevalue),
# which tests/conftest.py cannot see: the whole table runs with the tests that use Docker
pytestmark = [pytest.mark.integration, pytest.mark.docker]

RUN_ID = "drv-1"

SUCCESS = """\
import os
from runner import log_metric
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.txt", "w").write("trained")
for step in range(3):
    print(f"step {step} loss={1.0 / (step + 1):.3f}", flush=True)
    log_metric("accuracy", 0.5 + step / 10, step=step)
"""

FAILING = """\
import sys
print("epoch 1 done", flush=True)
print("giving up: loss is nan", flush=True)
sys.exit(3)
"""

# The pid is this process's own (the training's on local; inside its container elsewhere).
SLEEPER = """\
import os, time
open("outputs/pid", "w").write(str(os.getpid()))
print("ready", flush=True)
time.sleep(600)
"""


@dataclass
class Driver:
    target: str
    root: Path
    home: Path
    docker: object = None
    rig: object = None
    host: dict = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.home / "runs" / RUN_ID

    def manifest(self, script: str, **keys) -> Path:
        """The project (src/train.py + tftrain.yml) for this target, with the scenario's keys;
        `compute` merges with the target's own compute keys."""
        (self.root / "src").mkdir(parents=True, exist_ok=True)
        (self.root / "src" / "train.py").write_text(script)
        compute = {"target": self.target, "kill_grace_seconds": 1, **keys.pop("compute", {})}
        document = {
            "name": "drv",
            "source_directory": "src",
            "entry_script": "train.py",
            "metrics": {"regex": {"loss": r"loss=([0-9.]+)"}},
            **keys,
        }
        if self.target == "docker":
            document.update(custom_docker_image=BASE_IMAGE)
        elif self.target == "pool":
            document.update(custom_docker_image=BASE_IMAGE)
            compute.update(pool_file="pool.yml")
            self.rig.write_pool(self.root / "pool.yml", [self.host], self.root / "pool-state")
        document["compute"] = compute
        path = self.root / "tftrain.yml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    def ran_there(self, stdout: str) -> bool:
        """The run's console says it ran on this target (and not on a default one)."""
        return {
            "local": "environment: current interpreter",
            "docker": "environment: image tftrain/drv:",
            "pool": f"placed on the pool: main 0 → {self.host.get('name')}",
        }[self.target] in stdout

    def left_running(self) -> list:
        """What of the run still lives: its training process (local), its containers (others)."""
        if self.target == "local":
            pid_file = self.run_dir / "workdir/outputs/pid"
            pid = int(pid_file.read_text()) if pid_file.exists() else None
            return [pid] if pid is not None and alive(pid) else []
        return leftover_containers(self.docker, RUN_ID)

    def vanish(self) -> tuple[str, ...]:
        """Take the training away from under the run; returns what the error may say."""
        if self.target == "local":
            os.kill(int((self.run_dir / "workdir/outputs/pid").read_text()), signal.SIGKILL)
            return ("killed by SIGKILL",)
        if self.target == "docker":
            [container] = leftover_containers(self.docker, RUN_ID)
            container.remove(force=True)
            # `docker rm -f` kills, then removes: the run sees whichever it asks about first
            return (f"container {container.name} vanished", "killed by SIGKILL")
        self.rig.container(self.host["name"]).kill()
        return (f"host {self.host['name']} ({self.host['address']}) stopped answering",)


@pytest.fixture(params=["local", "docker", "pool"])
def driver(request, tmp_path, home) -> Driver:
    if request.param == "local":
        return Driver("local", tmp_path / "project", home)
    docker = request.getfixturevalue("docker_client")
    if request.param == "docker":
        return Driver("docker", tmp_path / "project", home, docker=docker)
    rig = request.getfixturevalue("pool_rig")
    return Driver("pool", tmp_path / "project", home, docker=docker, rig=rig, host=rig.add_host("box-1", cpu_slots=2))


def assert_ended(driver: Driver, status: str, exit_code: int) -> dict:
    """run.json and `tftrain runs show` agree on the status; run.json has the exit code."""
    record = json.loads((driver.run_dir / "run.json").read_text())
    assert (record["status"], record["exit_code"]) == (status, exit_code), record
    shown = tftrain("runs", "show", RUN_ID)
    assert shown.returncode == 0, shown.stderr
    assert f"run {RUN_ID}: {status}" in shown.stdout
    return record


def started_until_ready(driver: Driver, path: Path) -> subprocess.Popen:
    """`tftrain run` in the background, once its training printed "ready" into the rank log."""
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(driver.run_dir / "workdir/logs/0.log", "ready", timeout=180)
    except AssertionError:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"the training never got ready:\n{out[-3000:]}\n{err[-3000:]}") from None
    return process


def test_success_brings_outputs_metrics_and_logs_back(driver):
    result = tftrain("run", "-f", str(driver.manifest(SUCCESS)), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert_ended(driver, "Completed", 0)
    workdir = driver.run_dir / "workdir"
    assert (workdir / "outputs/model/weights.txt").read_text() == "trained"
    assert "step 2 loss=0.333" in (workdir / "logs/0.log").read_text()
    summary = json.loads((driver.run_dir / "metrics.json").read_text())["metrics"]
    assert (summary["loss"]["last"], summary["loss"]["count"]) == (0.333, 3)  # from the log
    assert (summary["accuracy"]["last"], summary["accuracy"]["count"]) == (0.7, 3)  # from log_metric
    assert "registered model drv@v1" in result.stdout
    assert driver.ran_there(result.stdout), result.stdout[-3000:]
    assert driver.left_running() == []


def test_failure_is_failed_and_points_at_the_log(driver):
    result = tftrain("run", "-f", str(driver.manifest(FAILING)), timeout=300)
    assert result.returncode == TrainingFailed.exit_code, result.stdout[-3000:] + result.stderr
    log = driver.run_dir / "workdir/logs/0.log"
    assert f"run {RUN_ID} Failed: train.py exited with code 3 (log: {log})" in result.stderr
    assert "giving up: loss is nan" in log.read_text()
    record = assert_ended(driver, "Failed", TrainingFailed.exit_code)
    assert "train.py exited with code 3" in record["message"]
    assert driver.left_running() == []


def test_time_limit_times_out_and_stops_everything(driver):
    path = driver.manifest(SLEEPER, max_run_duration_seconds=4)
    started = time.monotonic()
    result = tftrain("run", "-f", str(path), timeout=300)
    assert result.returncode == TrainingTimedOut.exit_code, result.stdout[-3000:] + result.stderr
    assert time.monotonic() - started < 90
    assert "TimedOut: max_run_duration_seconds (4s) reached" in result.stderr
    assert_ended(driver, "TimedOut", TrainingTimedOut.exit_code)
    assert "ready" in (driver.run_dir / "workdir/logs/0.log").read_text()
    assert driver.left_running() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_cancels_keeps_the_logs_and_stops_everything(driver, sig):
    process = started_until_ready(driver, driver.manifest(SLEEPER))
    process.send_signal(sig)
    out, err = process.communicate(timeout=120)
    assert process.returncode == TrainingCanceled.exit_code, out[-3000:] + err
    assert f"{sig.name}: stopping the training" in out
    assert f"run {RUN_ID} Canceled" in err
    assert_ended(driver, "Canceled", TrainingCanceled.exit_code)
    assert "ready" in (driver.run_dir / "workdir/logs/0.log").read_text()
    assert (driver.run_dir / "workdir/outputs/pid").exists()  # what the training wrote came back
    assert driver.left_running() == []


def test_a_training_that_vanishes_fails_the_run_at_once(driver):
    # the deadline is far away: the run must end because its training is gone, not by its clock
    process = started_until_ready(driver, driver.manifest(SLEEPER, max_run_duration_seconds=600))
    expected = driver.vanish()
    vanished = time.monotonic()
    out, err = process.communicate(timeout=120)
    assert time.monotonic() - vanished < 30, out[-3000:] + err
    assert process.returncode == TrainingFailed.exit_code, out[-3000:] + err
    assert any(message in err for message in expected), err
    assert_ended(driver, "Failed", TrainingFailed.exit_code)
    assert driver.left_running() == []
