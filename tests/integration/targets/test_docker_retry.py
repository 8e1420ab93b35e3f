"""`retry:` on the docker target against a real dockerd: the training's container killed under the
run (`docker kill`, a kill tftrain did not send) and SIGTERM to tftrain while its container trains.
The next attempt runs in a new container and resumes from the last checkpoint: the one synced to S3
(moto's server) from the bind-mounted outputs, or without `checkpoints:` the previous run's own
outputs/checkpoints. The image is test_docker's (name digits, the same environment): cached."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import boto3
import pytest
import yaml
from conftest import BASE_IMAGE, TFTRAIN
from test_docker import docker_manifest
from watching import leftover_containers, until

pytestmark = pytest.mark.integration

EVERY = 20  # steps between checkpoints
STEPS = 200
# A TensorFlow-style checkpoint by name (PREFIX.data-00000-of-00001, then PREFIX.index, each put in
# place whole) holding the step: what the sync takes as complete, without importing TensorFlow.
SCRIPT = f"""\
import os, pathlib, time
checkpoints = pathlib.Path("outputs/checkpoints")
given = os.environ.get("TFTRAIN_RESUME_FROM")
start = 0
for source in (checkpoints, pathlib.Path(given) if given else None):
    if source is not None and (source / "step.index").exists():
        start = int((source / "step.index").read_text())
        print(f"restored step {{start}} from {{source}}", flush=True)
        break
print(f"first step {{start + 1}} at {{time.time()}}", flush=True)
for step in range(start + 1, {STEPS} + 1):
    time.sleep(0.05)
    print(f"step {{step}}", flush=True)
    if step % {EVERY} == 0:
        checkpoints.mkdir(parents=True, exist_ok=True)
        for name in ("step.data-00000-of-00001", "step.index"):
            (checkpoints / "tmp").write_text(str(step))
            os.replace(checkpoints / "tmp", checkpoints / name)
print("done", flush=True)
"""
RETRY = "retry: {max_attempts: 3}\nstop_grace_seconds: 2\nmodel: {register: false}\n"


def sync(bucket: str, endpoint: str) -> str:
    return (
        f"checkpoints:\n  dir: outputs/checkpoints\n  sync_to: s3://{bucket}/team\n  every_seconds: 1\n  endpoint_url:"
        f" {endpoint}\n"
    )


def steps_in(log: Path) -> list[int]:
    return [int(step) for step in re.findall(r"^step (\d+)$", log.read_text() if log.exists() else "", re.M)]


def started(path: Path, log: Path, until_step: int) -> subprocess.Popen:
    """`tftrain run` in the background, once its training logged `until_step`."""
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    until(
        lambda: max(steps_in(log), default=0) >= until_step or process.poll() is not None,
        f"step {until_step} in {log}",
        timeout=300,
    )
    assert process.poll() is None, process.communicate()[0][-3000:]
    return process


def resumed(home: Path, run_id: str, stopped_at: float) -> tuple[int, float]:
    """The attempt's first step, and how long after `stopped_at` it came."""
    found = re.search(
        r"^first step (\d+) at ([0-9.]+)$", (home / f"runs/{run_id}/workdir/logs/0.log").read_text(), re.M
    )
    return int(found[1]), float(found[2]) - stopped_at


@pytest.mark.parametrize(
    ("synced", "removed"),
    [(True, False), (False, False), (True, True)],
    ids=["killed-checkpoint-sync", "killed-local-checkpoints", "removed-checkpoint-sync"],
)
def test_a_container_killed_under_the_run_is_retried_in_a_new_one(
    docker_client, home, tmp_path, s3_server, aws_env, synced, removed
):
    extra = RETRY
    if synced:
        boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="docker-retry")
        extra += sync("docker-retry", s3_server)
    path = docker_manifest(tmp_path, SCRIPT, extra)
    first_log = home / "runs/digits-1/workdir/logs/0.log"
    process = started(path, first_log, 2 * EVERY + EVERY // 2)  # mid-way between the 2nd and 3rd checkpoint
    [container] = leftover_containers(docker_client, "digits-1")
    if removed:
        container.remove(force=True)  # the container vanished with its machine
    else:
        container.kill()  # a kill tftrain did not send: the machine's, or the OOM killer's
    killed_at = time.time()
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-4000:]
    done = max(steps_in(first_log))
    ref = "checkpoint:digits-1" if synced else str(home / "runs/digits-1/workdir/outputs/checkpoints")
    assert f"run digits-1 preempted: attempt 2 of 3 resumes from {ref}" in " ".join(output.split())

    first_step, took = resumed(home, "digits-2", killed_at)
    checkpointed = done - done % EVERY
    assert first_step == checkpointed + 1, (first_step, done)  # from the last checkpoint written
    assert steps_in(home / "runs/digits-2/workdir/logs/0.log")[-1] == STEPS
    redone = done - checkpointed
    print(
        f"\n{'with' if synced else 'without'} checkpoint sync: {'removed' if removed else 'killed'} at step {done}; the"
        f" next attempt's first step {first_step}, {took:.2f}s after the kill; {redone} steps redone"
    )
    if synced:  # what the container wrote reached the store through the bind mount, and came back from it
        listed = json.loads(
            boto3.client("s3", endpoint_url=s3_server)
            .get_object(Bucket="docker-retry", Key="team/digits-1/tftrain-checkpoints.json")["Body"]
            .read()
        )
        assert [item["kind"] for item in listed["checkpoints"]] == ["tensorflow"]
        assert (home / "runs/digits-2/resume/step.index").read_text() == str(checkpointed)
    # both attempts keep their own logs and outputs; neither container is left
    assert (home / "runs/digits-1/workdir/outputs/checkpoints/step.index").read_text() == str(checkpointed)
    assert "done" not in first_log.read_text() and "done" in (home / "runs/digits-2/workdir/logs/0.log").read_text()
    assert leftover_containers(docker_client, "digits-1") == [] and leftover_containers(docker_client, "digits-2") == []
    first = json.loads((home / "runs/digits-1/run.json").read_text())
    assert (first["status"], first["attempt"]["ended"], first["attempt"]["next"]) == ("Failed", "preempted", "digits-2")


def test_sigterm_to_tftrain_during_a_docker_run_is_continued_by_the_next_run(
    docker_client, cli, home, tmp_path, s3_server, aws_env
):
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="docker-sigterm")
    path = docker_manifest(tmp_path, SCRIPT, RETRY + sync("docker-sigterm", s3_server))
    first_log = home / "runs/digits-1/workdir/logs/0.log"
    process = started(path, first_log, 2 * EVERY + EVERY // 2)
    process.send_signal(signal.SIGTERM)  # the runner's machine is going away
    stopped_at = time.time()
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 12, output[-3000:]
    assert "attempt 2" not in output  # not on a machine that is going away
    assert leftover_containers(docker_client, "digits-1") == []
    done = max(steps_in(first_log))

    second = cli("run", "-f", str(path), timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    assert "run digits-1 was preempted: this is attempt 2 of 3, resuming from checkpoint:digits-1" in " ".join(
        (second.stdout + second.stderr).split()
    )
    first_step, _ = resumed(home, "digits-2", stopped_at)
    assert first_step == done - done % EVERY + 1, (first_step, done)  # the checkpoint synced as the first attempt ended
    assert "done" in (home / "runs/digits-2/workdir/logs/0.log").read_text() and first_log.exists()
    record = json.loads((home / "runs/digits-1/run.json").read_text())
    assert (record["status"], record["attempt"]["ended"], record["attempt"]["next"]) == (
        "Canceled",
        "preempted",
        "digits-2",
    )


def test_a_lost_docker_run_is_continued_once_its_container_is_removed(
    docker_client, cli, home, tmp_path, s3_server, aws_env
):
    """tftrain killed (SIGKILL): its container goes on training by itself. The next `tftrain run`
    marks the run lost, removes that container (else two trainings would write one checkpoint
    directory) and continues from the checkpoint. No round of the sync ran (every_seconds: 3600):
    the next attempt falls back to the lost run's own checkpoint directory."""
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="docker-lost")
    path = docker_manifest(
        tmp_path, SCRIPT, RETRY + sync("docker-lost", s3_server).replace("every_seconds: 1", "every_seconds: 3600")
    )
    first_log = home / "runs/digits-1/workdir/logs/0.log"
    process = started(path, first_log, 2 * EVERY + EVERY // 2)
    process.kill()
    process.wait()
    second = cli("run", "-f", str(path), timeout=300)
    output = " ".join((second.stdout + second.stderr).split())
    assert second.returncode == 0, output[-3000:]
    assert "run digits-1 marked Failed (lost: tftrain process" in output and "removed 1 container" in output
    local = home / "runs/digits-1/workdir/outputs/checkpoints"
    assert (
        "run digits-1 synced no complete checkpoint to s3://docker-lost/team: attempt 2 resumes from its local"
        f" checkpoint directory {local}" in output
    )
    assert leftover_containers(docker_client, "digits-1") == []
    done = max(steps_in(first_log))
    assert "done" not in first_log.read_text() and done < STEPS  # the orphan was stopped, not left to finish
    first_step, _ = resumed(home, "digits-2", 0)
    assert first_step == int((local / "step.index").read_text()) + 1 and first_step > EVERY
    assert (
        f"restored step {first_step - 1} from outputs/checkpoints"
        in (home / "runs/digits-2/workdir/logs/0.log").read_text()
    )  # seeded


@pytest.mark.parametrize("synced", [True, False], ids=["checkpoint-sync", "local-checkpoints"])
def test_the_preemptible_example_in_a_killed_container_resumes_from_its_last_epoch(
    docker_client, home, tmp_path, repo, s3_server, aws_env, synced
):
    """examples/preemptible (Keras, BackupAndRestore each epoch, 45 steps an epoch) in the cached
    image: its container killed inside epoch 3, the next attempt starts at epoch 3's first step."""
    root = tmp_path / "preemptible"
    shutil.copytree(repo / "examples" / "preemptible", root)
    manifest = yaml.safe_load((root / "tftrain.yml").read_text())
    manifest.update(
        name="digits", use_docker=True, custom_docker_image=BASE_IMAGE, model={"path": "outputs/model", "gate": "off"}
    )
    manifest["script_params"].update({"--epochs": 6, "--step-seconds": 0.02})
    if synced:
        boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="docker-example")
        manifest["checkpoints"] = {
            "dir": "outputs/checkpoints",
            "sync_to": "s3://docker-example/team",
            "every_seconds": 1,
            "endpoint_url": s3_server,
        }
    (root / "tftrain.yml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    first_log = home / "runs/digits-1/workdir/logs/0.log"
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(root / "tftrain.yml")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        until(
            lambda: (
                "epoch 3 begins" in (first_log.read_text() if first_log.exists() else "") or process.poll() is not None
            ),
            "epoch 3",
            timeout=300,
        )
        time.sleep(0.5)  # inside epoch 3: epochs 1 and 2 are backed up
        [container] = leftover_containers(docker_client, "digits-1")
        container.kill()
        killed_at = time.time()
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output[-4000:]
    log = (home / "runs/digits-2/workdir/logs/0.log").read_text()
    assert "epoch 1 begins" not in log
    found = re.search(r"first step (\d+) at ([0-9.]+)", log)
    first_step, took = int(found[1]), float(found[2]) - killed_at
    points = [json.loads(line) for line in (home / "runs/digits-1/metrics.jsonl").read_text().splitlines()]
    done = max(p["step"] for p in points if p["name"] == "step_loss")
    assert first_step == 2 * 45 + 1  # epoch 3's first: epochs 1 and 2 come from the backup
    print(
        f"\nexample, {'with' if synced else 'without'} checkpoint sync: killed at step {done}; the next attempt's first"
        f" step {first_step}, {took:.2f}s after the kill; {done - first_step + 1} steps redone"
    )
