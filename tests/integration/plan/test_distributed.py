"""Real multi-process training on this machine: Horovod over Open MPI, parameter servers,
multi-worker mirrored, all through `tftrain run`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TFTRAIN

pytestmark = pytest.mark.integration


def example(repo: Path, name: str) -> Path:
    return repo / "examples" / name / "tftrain.yml"


def run_example(cli, repo: Path, home: Path, name: str, timeout: float) -> tuple[str, Path]:
    """Run examples/NAME; its stdout and the run's logs directory."""
    result = cli("run", "-f", str(example(repo, name)), timeout=timeout)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    return result.stdout, home / f"runs/{name}-1/workdir/logs"


def series(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_horovod_two_ranks(repo, cli, home, lasting_cache):
    stdout, logs = run_example(cli, repo, home, "horovod-keras", 1800)
    rank0, rank1 = (logs / "0.log").read_text(), (logs / "1.log").read_text()
    assert "horovod rank 0 of size 2" in rank0, rank0
    assert "horovod rank 1 of size 2" in rank1, rank1
    assert "[0] horovod rank 0 of size 2" in stdout and "[1] horovod rank 1 of size 2" in stdout, stdout
    assert "rank 0 saved outputs/model/model.keras" in rank0, rank0
    points = series(home / "runs/horovod-keras-1")
    assert {p["rank"] for p in points} == {0}, points  # the run's metrics are rank 0's
    assert [p["step"] for p in points if p["name"] == "accuracy"] == [1, 2, 3, 4], (points, rank0)
    assert "registered model horovod-keras@v1" in stdout


def test_parameter_server_job(repo, cli, home):
    stdout, logs = run_example(cli, repo, home, "parameter-server", 600)
    assert "chief: coordinating 2 workers" in (logs / "0.log").read_text()
    assert "epoch 3: loss=" in (logs / "0.log").read_text()
    for rank, role in ((1, "worker:0"), (2, "worker:1"), (3, "ps:0")):
        assert f"task {role} in cluster" in (logs / f"{rank}.log").read_text()
    assert [p["step"] for p in series(home / "runs/parameter-server-1") if p["name"] == "loss"] == [1, 2, 3]
    assert "registered model parameter-server@v1" in stdout


LEGACY = """\
import json, os, time
import tensorflow as tf
config = json.loads(os.environ["TF_CONFIG"])
cluster = tf.train.ClusterSpec(config["cluster"])
task = config["task"]
print("sees", json.dumps({"jobs": sorted(cluster.jobs), "workers": cluster.num_tasks("worker"),
      "ps": cluster.job_tasks("ps"), "me": task}, sort_keys=True), flush=True)
server = tf.distribute.Server(cluster, job_name=task["type"], task_index=task["index"])
if task["type"] == "ps":
    server.join()
time.sleep(1)
"""


def test_legacy_cluster_spec_scripts_see_the_cluster(project, cli, home):
    path = project(
        script=LEGACY,
        manifest=(
            "node_count: 2\ncompute:\n  slots_per_node: 2\ndistributed_training:\n  backend: parameter_server\n"
            "  worker_count: 2\n  parameter_server_count: 1\n"
        ),
    )
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    lock = (home / "runs/demo-1/manifest.lock.yml").read_text()
    views = []
    for rank in range(4):
        line = next(
            text
            for text in (home / f"runs/demo-1/workdir/logs/{rank}.log").read_text().splitlines()
            if text.startswith("sees ")
        )
        views.append(json.loads(line[5:]))
    assert [v["me"] for v in views] == [
        {"type": "chief", "index": 0},
        {"type": "worker", "index": 0},
        {"type": "worker", "index": 1},
        {"type": "ps", "index": 0},
    ]
    assert all(v["jobs"] == ["chief", "ps", "worker"] and v["workers"] == 2 for v in views)
    assert all(v["ps"] == views[0]["ps"] and v["ps"][0] in lock for v in views)


def test_multi_worker_mirrored(repo, cli, home, machine_tmp):  # the worker's copy of the model not left there
    stdout, logs = run_example(cli, repo, home, "multi-worker", 600)
    assert "worker 0 of 2 replicas" in (logs / "0.log").read_text()
    assert "worker 1 of 2 replicas" in (logs / "1.log").read_text()
    assert "registered model multi-worker@v1" in stdout
    assert sorted(path.name for path in machine_tmp.iterdir()) == []


def _task_pid(run_id: str, role: str, index: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"TFTRAIN_RUN_ID={run_id}".encode() in environ and any(
            item.startswith(b"TF_CONFIG=") and f'"task": {{"type": "{role}", "index": {index}}}'.encode() in item
            for item in environ
        ):
            return int(entry.name)
    return None


def test_a_dying_worker_fails_the_job_quickly(repo, home):
    path = example(repo, "parameter-server")
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = home / "runs/parameter-server-1/workdir/logs/0.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "chief: coordinating" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = _task_pid("parameter-server-1", "worker", 1)
    assert pid, "worker 1 not found"
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    out, err = process.communicate(timeout=60)
    assert time.monotonic() - killed < 30
    assert process.returncode == 10, err
    assert "worker 1 exited with code -9 (killed by SIGKILL)" in err
    assert _task_pid("parameter-server-1", "ps", 0) is None and _task_pid("parameter-server-1", "chief", 0) is None


def test_bad_distributed_input_fails_before_anything_starts(project, cli, home):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        path = project(
            manifest=(
                "distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 2\n  base_port:"
                f" {port}\ncompute:\n  slots_per_node: 2\n"
            )
        )
        result = cli("run", "-f", str(path))
    assert result.returncode == 13
    assert f"distributed_training.base_port: port {port} on 127.0.0.1 is already in use" in result.stderr
    result = cli(
        "run", "-f", str(project(manifest="distributed_training:\n  backend: mpi\n  process_count_per_node: 0\n"))
    )
    assert (
        result.returncode == 3 and "process_count_per_node: Input should be greater than or equal to 1" in result.stderr
    )


def test_parameter_server_job_in_containers(repo, cli, home, docker_client, tmp_path):
    """One container per task, on the host's network, from the same training image."""
    import shutil

    from conftest import BASE_IMAGE

    source = tmp_path / "ps"
    shutil.copytree(repo / "examples" / "parameter-server", source)
    manifest = source / "tftrain.yml"
    manifest.write_text(
        manifest.read_text()
        + f"use_docker: true\ncustom_docker_image: {BASE_IMAGE}\nframework_version: '2.18'\npip_packages:"
        " [scikit-learn]\n"
    )
    result = cli("run", "-f", str(manifest), timeout=1200)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    logs = home / "runs/parameter-server-1/workdir/logs"
    assert "epoch 3: loss=" in (logs / "0.log").read_text()
    assert "task ps:0 in cluster" in (logs / "3.log").read_text()
    assert docker_client.containers.list(all=True, filters={"label": "tftrain.run-id=parameter-server-1"}) == []


def test_horovod_in_a_container(repo, cli, home, docker_client, tmp_path):
    """The image's MPI layer (Open MPI, Horovod built against the image's TensorFlow); mpirun
    starts both ranks inside one container."""
    import shutil

    from conftest import BASE_IMAGE

    source = tmp_path / "hvd"
    shutil.copytree(repo / "examples" / "horovod-keras", source)
    manifest = source / "tftrain.yml"
    manifest.write_text(manifest.read_text() + f"use_docker: true\ncustom_docker_image: {BASE_IMAGE}\n")
    result = cli("run", "-f", str(manifest), timeout=2400)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    logs = home / "runs/horovod-keras-1/workdir/logs"
    assert "horovod rank 0 of size 2" in (logs / "0.log").read_text()
    assert "horovod rank 1 of size 2" in (logs / "1.log").read_text()
    assert "registered model horovod-keras@v1" in result.stdout
