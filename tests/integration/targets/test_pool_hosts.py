"""The pool target on real hosts built here (tests/pool_rig.py): containers with their own IP,
hostname and sshd on a network the test made, reached over ssh and docker."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import BASE_IMAGE, TFTRAIN

pytestmark = pytest.mark.integration

HOSTNAME_SCRIPT = """\
import json, os, socket, sys
print(f"task on {socket.gethostname()} with TF_CONFIG={os.environ.get('TF_CONFIG', '')}", flush=True)
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/host.txt", "w").write(socket.gethostname())
os.makedirs("logs", exist_ok=True)
open("logs/note.txt", "w").write("from " + socket.gethostname())
"""


def pool_project(tmp_path: Path, script: str, extra: str = "", name: str = "pooled") -> Path:
    source = tmp_path / "project"
    source.mkdir(parents=True)
    (source / "train.py").write_text(script)
    manifest = source / "tftrain.yml"
    manifest.write_text(
        f"name: {name}\nentry_script: train.py\ncustom_docker_image: {BASE_IMAGE}\nframework_version: '2.18'\n"
        f"compute:\n  target: pool\n  pool_file: pool.yml\n{extra}"
    )
    return manifest


def leftovers(docker_client, run_id: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"tftrain.run-id={run_id}"})


def test_a_job_runs_on_a_pool_host_and_its_outputs_come_back(pool_rig, docker_client, cli, home, tmp_path):
    host = pool_rig.add_host("gpu-box-1")
    manifest = pool_project(tmp_path, HOSTNAME_SCRIPT)
    pool_rig.write_pool(manifest.parent / "pool.yml", [host], tmp_path / "state")
    result = cli("run", "-f", str(manifest), timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    assert "placed on the pool: main 0 → gpu-box-1 (1 CPU slot)" in result.stdout
    run_dir = home / "runs/pooled-1/workdir"
    assert "task on gpu-box-1" in (run_dir / "logs/0.log").read_text()
    assert (run_dir / "outputs/model/host.txt").read_text() == "gpu-box-1"
    assert (run_dir / "logs/note.txt").read_text() == "from gpu-box-1"
    assert "registered model pooled@v1" in result.stdout
    assert leftovers(docker_client, "pooled-1") == []


def example_on_pool(repo: Path, tmp_path: Path, example: str, **changes) -> Path:
    """A copy of an example, sent to the pool, its script first printing the task's hostname."""
    source = tmp_path / example
    shutil.copytree(repo / "examples" / example, source)
    script = source / "train.py"
    script.write_text("import socket\nprint(f'running on {socket.gethostname()}', flush=True)\n" + script.read_text())
    manifest = source / "tftrain.yml"
    document = yaml.safe_load(manifest.read_text())
    document.update(custom_docker_image=BASE_IMAGE, **changes)
    document["compute"] = {"target": "pool", "pool_file": "pool.yml", **changes.get("compute", {})}
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
    return manifest


def test_parameter_server_tasks_spread_over_three_hosts(pool_rig, docker_client, repo, cli, home, tmp_path):
    hosts = [
        pool_rig.add_host("ps-a", cpu_slots=2),
        pool_rig.add_host("ps-b", cpu_slots=1),
        pool_rig.add_host("ps-c", cpu_slots=1),
    ]
    manifest = example_on_pool(
        repo, tmp_path, "parameter-server", framework_version="2.18", pip_packages=["scikit-learn"]
    )
    pool_rig.write_pool(manifest.parent / "pool.yml", hosts, tmp_path / "state")
    result = cli("run", "-f", str(manifest), timeout=1800)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    logs = home / "runs/parameter-server-1/workdir/logs"
    seen = [(logs / f"{rank}.log").read_text().split("running on ", 1)[1].split()[0] for rank in range(4)]
    assert sorted(seen) == ["ps-a", "ps-a", "ps-b", "ps-c"]  # chief, two workers, ps: ps-a has two slots
    cluster = (logs / "0.log").read_text()
    assert all(host["address"] in cluster for host in hosts)
    assert "epoch 3: loss=" in (logs / "0.log").read_text()
    assert (home / "runs/parameter-server-1/workdir/outputs/model/model.keras").is_file()
    assert leftovers(docker_client, "parameter-server-1") == []


def test_horovod_across_two_hosts(pool_rig, docker_client, repo, cli, home, tmp_path):
    """Horovod's Docker recipe: sshd in every node's container on the host's network, mpirun in
    the first; one rank per host."""
    hosts = [pool_rig.add_host("node-a"), pool_rig.add_host("node-b")]
    manifest = example_on_pool(
        repo,
        tmp_path,
        "horovod-keras",
        node_count=2,
        distributed_training={"backend": "mpi", "process_count_per_node": 1},
    )
    pool_rig.write_pool(manifest.parent / "pool.yml", hosts, tmp_path / "state")
    result = cli("run", "-f", str(manifest), timeout=2400)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    logs = home / "runs/horovod-keras-1/workdir/logs"
    assert "running on node-a" in (logs / "0.log").read_text()
    assert "running on node-b" in (logs / "1.log").read_text()
    assert "horovod rank 1 of size 2" in (logs / "1.log").read_text()
    assert "registered model horovod-keras@v1" in result.stdout
    assert leftovers(docker_client, "horovod-keras-1") == []


SLEEPER = """\
import os, socket, sys, time
print(f"ready on {socket.gethostname()} at {time.time():.3f}", flush=True)
time.sleep(float(os.environ.get("SLEEP", "600")))
print(f"done on {socket.gethostname()} at {time.time():.3f}", flush=True)
"""


def test_a_host_that_dies_fails_the_job_within_30s_and_nothing_is_left(pool_rig, docker_client, tmp_path, home):
    hosts = [pool_rig.add_host("alive", cpu_slots=2), pool_rig.add_host("doomed", cpu_slots=2)]
    manifest = pool_project(
        tmp_path,
        SLEEPER,
        "  hosts: [alive, doomed]\ndistributed_training: {backend: parameter_server, worker_count: 2,"
        " parameter_server_count: 1}\n",
    )
    pool_rig.write_pool(manifest.parent / "pool.yml", hosts, tmp_path / "state")
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(manifest)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    logs = home / "runs/pooled-1/workdir/logs"
    deadline = time.monotonic() + 600
    while sum("ready on" in log.read_text() for log in logs.glob("[0-9].log")) < 4:
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
        time.sleep(0.5)
    assert {log.read_text().split("ready on ")[1].split()[0] for log in logs.glob("[0-9].log")} == {"alive", "doomed"}
    pool_rig.container("doomed").kill()
    killed = time.monotonic()
    output, _ = process.communicate(timeout=120)
    assert time.monotonic() - killed < 30, output
    assert process.returncode == 10, output
    assert f"host doomed ({hosts[1]['address']}) stopped answering" in output
    assert leftovers(docker_client, "pooled-1") == []


def test_two_jobs_for_the_same_slot_run_one_after_the_other(pool_rig, tmp_path):
    host = pool_rig.add_host("single-slot", cpu_slots=1)
    runs = []
    for name in ("first", "second"):
        manifest = pool_project(tmp_path / name, SLEEPER, "environment_variables: {SLEEP: '3'}\n", name=name)
        pool_rig.write_pool(manifest.parent / "pool.yml", [host], tmp_path / "state")
        env = {**os.environ, "TFTRAIN_HOME": str(tmp_path / name / "home")}
        runs.append(
            subprocess.Popen(
                [TFTRAIN, "run", "-f", str(manifest)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
        )
    outputs = [process.communicate(timeout=600)[0] for process in runs]
    assert [process.returncode for process in runs] == [0, 0], outputs
    assert (
        sum("queued (position 1 in the pool's queue): main 0 needs 1 free CPU slots" in output for output in outputs)
        == 1
    )
    spans = []
    for name in ("first", "second"):
        log = (tmp_path / name / "home" / f"runs/{name}-1/workdir/logs/0.log").read_text()
        spans.append((float(log.split(" at ")[1].split()[0]), float(log.split(" at ")[2].split()[0])))
    spans.sort()
    assert spans[0][1] <= spans[1][0], spans  # the second started after the first ended


def test_docker_over_ssh_to_this_machine(docker_client, rig_keys, tmp_path, home, cli, monkeypatch):
    from pool_rig import loopback_sshd

    private, public = rig_keys
    monkeypatch.setenv("TFTRAIN_SSH_KEY", private)
    sshd, port = loopback_sshd(tmp_path / "sshd", public)
    try:
        host = {
            "name": "over-ssh",
            "address": "127.0.0.1",
            "ssh_port": port,
            "docker": f"ssh://root@127.0.0.1:{port}",
            "cpu_slots": 1,
        }
        manifest = pool_project(tmp_path, HOSTNAME_SCRIPT)
        (manifest.parent / "pool.yml").write_text(
            yaml.safe_dump({"hosts": [host], "state_dir": str(tmp_path / "state")})
        )
        status = cli("pool", "status", "-f", str(manifest), "--json")
        assert status.returncode == 0, status.stderr
        (row,) = json.loads(status.stdout)
        assert row["ssh"] == "ok" and row["docker"] == docker_client.version()["Version"] and row["problem"] is None
        result = cli("run", "-f", str(manifest), timeout=900)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr
        assert (home / "runs/pooled-1/workdir/outputs/model/host.txt").read_text() == socket.gethostname()
    finally:
        sshd.terminate()
        sshd.wait()
    assert leftovers(docker_client, "pooled-1") == []


def test_bad_pool_input_fails_before_anything_launches(cli, home, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    hosts = [{"name": "gpu-1", "address": "127.0.0.1", "ssh_port": closed, "gpus": 2}]
    manifest = pool_project(tmp_path, HOSTNAME_SCRIPT, "  hosts: [gpu-2]\n")
    (manifest.parent / "pool.yml").write_text(yaml.safe_dump({"hosts": hosts, "state_dir": str(tmp_path / "state")}))
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 3
    assert "compute.hosts[0]: unknown host 'gpu-2'; did you mean 'gpu-1'?" in result.stderr
    too_big = (
        manifest.read_text().replace("  hosts: [gpu-2]\n", "")
        + "use_gpu: true\nnode_count: 1\ndistributed_training: {backend: mpi, process_count_per_node: 3}\n"
    )
    manifest.write_text(too_big)
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 19, result.stderr
    assert (
        "can never run on" in result.stderr
        and "the job needs 3 GPUs and the pool's eligible hosts have 2" in result.stderr
    )
    manifest.write_text(too_big.replace("process_count_per_node: 3", "process_count_per_node: 1"))
    check = cli("pool", "check", "-f", str(manifest))
    assert check.returncode == 20
    assert "host gpu-1 (127.0.0.1): unreachable over ssh" in check.stderr and "Connection refused" in check.stderr
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 20 and "the pool cannot run this job" in result.stderr
    assert "Traceback" not in result.stderr + check.stderr
