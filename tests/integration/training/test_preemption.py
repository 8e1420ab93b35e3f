"""A preemptible run for real: the example's Keras training is killed mid-epoch (SIGKILL to its
process group, as when a spot machine's container is taken), and the next attempt, started by
`retry:`, resumes from the last backed-up epoch. The example's interpreter is this one
(user_managed): TensorFlow is here already."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import TFTRAIN

pytestmark = pytest.mark.integration


def project(repo: Path, tmp_path: Path, step_seconds: float) -> Path:
    root = tmp_path / "preemptible"
    shutil.copytree(repo / "examples" / "preemptible", root)
    manifest = yaml.safe_load((root / "tftrain.yml").read_text())
    for key in ("framework_version", "pip_packages"):
        manifest.pop(key)
    manifest.update(user_managed=True, python=sys.executable, model={"path": "outputs/model", "gate": "off"})
    manifest["script_params"].update({"--epochs": 6, "--step-seconds": step_seconds})
    (root / "tftrain.yml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return root / "tftrain.yml"


def wait_for(path: Path, pattern: str, process: subprocess.Popen, timeout: float = 300) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text()) if path.exists() else None
        if found:
            return found
        assert process.poll() is None, f"tftrain ended before {pattern!r}: {process.communicate()}"
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} in {path} after {timeout}s")


def steps(run_dir: Path) -> list[int]:
    points = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return sorted(p["step"] for p in points if p["name"] == "step_loss")


def test_a_training_killed_mid_epoch_resumes_from_its_last_epoch(repo, home, tmp_path):
    manifest = project(repo, tmp_path, step_seconds=0.02)  # 45 steps an epoch: about a second each
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(manifest)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        start_new_session=True,
    )
    try:
        first_log = home / "runs" / "preemptible-1" / "workdir" / "logs" / "0.log"
        pid = int(wait_for(first_log, r"first step 1 at [0-9.]+ \(pid (\d+)\)", process).group(1))
        wait_for(first_log, r"epoch 3 begins", process)
        time.sleep(0.5)  # inside epoch 3: epochs 1 and 2 are backed up
        group = os.getpgid(pid)
        assert group not in (os.getpgrp(), os.getpgid(process.pid))  # the training's own group, not tftrain's
        os.killpg(group, signal.SIGKILL)
        killed_at = time.time()
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output[-4000:]
    assert "run preemptible-1 preempted: attempt 2 of 3 resumes from" in output

    second = home / "runs" / "preemptible-2"
    log = (second / "workdir" / "logs" / "0.log").read_text()
    assert "resuming from the backup in" in log and "epoch 1 begins" not in log
    started = re.search(r"first step (\d+) at ([0-9.]+)", log)
    first_step, started_at = int(started.group(1)), float(started.group(2))
    done = steps(home / "runs" / "preemptible-1")
    redone = done[-1] - first_step + 1
    assert first_step == 2 * 45 + 1  # epoch 3's first step: epochs 1 and 2 come from the backup
    assert 0 < redone <= 45  # at most the epoch that was cut short
    assert steps(second)[0] == first_step and steps(second)[-1] == 6 * 45  # the metrics go on from the backup's step
    print("\n".join(line for line in output.splitlines() if "✔" in line or "attempt" in line))
    print(f"\nkill → the next attempt's first step: {started_at - killed_at:.2f}s; steps redone: {redone}")

    record = json.loads((home / "runs" / "preemptible-1" / "run.json").read_text())
    assert record["attempt"]["ended"] == "preempted" and record["attempt"]["next"] == "preemptible-2"
    shown = subprocess.run(
        [TFTRAIN, "runs", "show", "preemptible-2"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    )
    assert "attempt 2 of 3; continues preemptible-1 from" in shown.stdout


RESUMING = """
import os, pathlib, time
previous = os.environ.get("TFTRAIN_RESUME_FROM")
done = int((pathlib.Path(previous) / "epoch").read_text()) if previous else 0
print(f"starting after epoch {done}", flush=True)
pathlib.Path("outputs/checkpoints").mkdir(parents=True, exist_ok=True)
pathlib.Path("outputs/model").write_text("model")
if done:
    raise SystemExit(0)
pathlib.Path("outputs/checkpoints/epoch").write_text("4")
print("ready", flush=True)
time.sleep(600)
"""
RETRYING = 'retry: {}\nstop_grace_seconds: 2\nmodel: {gate: "off"}\n'


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_or_lost_tftrain_is_continued_by_the_next_run(project, cli, home, sig):
    """SIGTERM to tftrain (its machine going away) ends the attempt Canceled, preempted; SIGKILL
    leaves it orphaned (lost). Either way the next `tftrain run` is attempt 2, from its checkpoint."""
    path = project(script=RESUMING, manifest=RETRYING)
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(home / "runs/demo-1/workdir/logs/0.log", "ready", process, timeout=60)
        process.send_signal(sig)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    cause = "preempted" if sig == signal.SIGTERM else "lost"
    if sig == signal.SIGTERM:
        assert process.returncode == 12, output
        assert "attempt 2" not in output  # not here: the machine is going away
    second = cli("run", "-f", str(path))
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"run demo-1 was {cause}: this is attempt 2 of 3, resuming from" in second.stdout + second.stderr
    assert "starting after epoch 4" in (home / "runs/demo-2/workdir/logs/0.log").read_text()
    first = json.loads((home / "runs/demo-1/run.json").read_text())
    assert (first["attempt"]["ended"], first["attempt"]["next"]) == (cause, "demo-2")


HELD = """
import os, pathlib, time
print("resumed from", os.environ.get("TFTRAIN_RESUME_FROM"), flush=True)
pathlib.Path("outputs/checkpoints").mkdir(parents=True, exist_ok=True)
pathlib.Path("outputs/checkpoints/epoch").write_text("4")
pathlib.Path("outputs/model").write_text("model")
print("ready", flush=True)
if pathlib.Path(HOLD).exists():
    time.sleep(600)
"""


def test_two_tftrain_runs_at_once_continue_a_lost_run_once(project, home, tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    path = project(script=HELD.replace("HOLD", repr(str(hold))), manifest=RETRYING)
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(home / "runs/demo-1/workdir/logs/0.log", "ready", process, timeout=60)
    finally:
        process.kill()  # lost
        process.wait()
    hold.unlink()
    both = [
        subprocess.Popen([TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120)[0] for run in both]
    assert [run.returncode for run in both] == [0, 0], outputs
    assert sum("run demo-1 was lost: this is attempt 2 of 3" in output for output in outputs) == 1, outputs
    chain = sorted(
        (record["attempt"]["number"], record["attempt"]["previous"])
        for record in (json.loads((home / f"runs/demo-{n}/run.json").read_text()) for n in (2, 3))
    )
    assert chain == [(1, None), (2, "demo-1")]  # the other one found demo-1 continued, and started afresh
