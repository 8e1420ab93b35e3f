"""The docker target against a real dockerd: image build and cache, runs, cleanup, secrets."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, TFTRAIN
from watching import leftover_containers

from runner.errors import Vanished
from runner.plan.model import ContainerSpec
from runner.targets.container import Container

pytestmark = pytest.mark.integration

# The same environment as the example: one heavy image (TensorFlow) shared by these tests.
ENVIRONMENT = f"""\
use_docker: true
custom_docker_image: {BASE_IMAGE}
framework_version: "2.18"
pip_packages: [scikit-learn]
"""


def docker_manifest(root: Path, script: str, extra: str = "", name: str = "digits") -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "train.py").write_text(script)
    path = root / "tftrain.yml"
    path.write_text(f"name: {name}\nsource_directory: src\nentry_script: train.py\n" + ENVIRONMENT + extra)
    return path


def started_until_ready(path: Path, home: Path) -> subprocess.Popen:
    """`tftrain run` started in the background, once its script (run digits-1) printed "ready"."""
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = home / "runs/digits-1/workdir/logs/0.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "ready" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return process


def test_example_in_docker_builds_once_and_caches(docker_client, cli, home, repo, tmp_path):
    source = tmp_path / "example"
    shutil.copytree(repo / "examples" / "mnist-keras", source)
    manifest = source / "tftrain.yml"
    manifest.write_text(
        manifest.read_text().replace("use_docker: false\n", f"use_docker: true\ncustom_docker_image: {BASE_IMAGE}\n")
    )

    first = cli("run", "-f", str(manifest), timeout=1200)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr
    run_dir = home / "runs" / "mnist-keras-1"
    assert (run_dir / "workdir/outputs/model/digits.keras").exists()
    points = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [p["value"] for p in points if p["name"] == "test_accuracy"][-1] > 0.9
    assert {p["source"] for p in points} == {"log", "tensorboard"}
    assert "registered model mnist-keras@v1" in first.stdout
    # the model gate ran in a container of the run's image: the Keras file loaded, its signature recorded
    assert "model gate: keras loads in TensorFlow 2.18" in first.stdout
    version = json.loads((home / "models" / "mnist-keras" / "v1" / "version.json").read_text())
    assert version["serving"]["checked_in"].startswith("image tftrain/")
    assert version["serving"]["path"] == "digits.keras" and version["serving"]["signatures"]["serving_default"][
        "inputs"
    ][0]["shape"] == [None, 64]
    assert leftover_containers(docker_client, "mnist-keras-1") == []
    lock = (run_dir / "manifest.lock.yml").read_text()
    image = next(line.split()[-1] for line in lock.splitlines() if line.strip().startswith("image: tftrain/"))

    second = cli("run", "-f", str(manifest))
    assert second.returncode == 0, second.stderr
    assert "(cached, no build)" in second.stdout and "building image" not in second.stdout

    (source / "train.py").write_text((source / "train.py").read_text() + "\n# a code-only change\n")
    third = cli("run", "-f", str(manifest))
    assert third.returncode == 0, third.stderr
    assert "(cached, no build)" in third.stdout and image in third.stdout

    # a real change of requirements, new in every test session (an old image must not satisfy it)
    marker = int.from_bytes(os.urandom(3), "big")
    manifest.write_text(
        manifest.read_text().replace("  - scikit-learn\n", f"  - scikit-learn\n  - six>=1.0.{marker}\n")
    )
    fourth = cli("run", "-f", str(manifest), timeout=1200)
    assert fourth.returncode == 0, fourth.stdout[-4000:] + fourth.stderr
    assert "building image" in fourth.stdout and image not in fourth.stdout
    assert "registered model mnist-keras@v4" in fourth.stdout

    listing = cli("images")
    assert image.split(":")[1][:12] in listing.stdout and "mnist-keras" in listing.stdout


def test_a_failed_build_names_the_step_and_is_recorded(docker_client, cli, home, tmp_path):
    path = docker_manifest(tmp_path, "print('never')\n", name="broken")
    path.write_text(path.read_text().replace("[scikit-learn]", "[tftrain-no-such-package-anywhere]"))
    result = cli("run", "-f", str(path), timeout=1200)
    assert result.returncode == 8
    assert "docker build failed at Step" in result.stderr
    assert "tftrain-no-such-package-anywhere" in result.stderr
    record = json.loads((home / "runs/broken-1/run.json").read_text())
    assert record["status"] == "Failed"
    assert [p["phase"] for p in record["phases"]] == ["Queued", "Preparing", "PostProcessing", "Failed"]


def test_script_errors_point_at_the_users_file(docker_client, cli, home, tmp_path):
    script = "print('starting', flush=True)\n\nraise ValueError('bad learning rate')\n"
    result = cli("run", "-f", str(docker_manifest(tmp_path, script)))
    assert result.returncode == 10
    assert "train.py:3: ValueError: bad learning rate" in result.stderr
    assert leftover_containers(docker_client, "digits-1") == []


SLEEPER = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"


def test_time_limit_stops_and_removes_the_container(docker_client, cli, home, tmp_path):
    path = docker_manifest(tmp_path, SLEEPER, "max_run_duration_seconds: 5\ncompute:\n  kill_grace_seconds: 1\n")
    started = time.monotonic()
    result = cli("run", "-f", str(path))
    assert result.returncode == 11, result.stderr
    assert time.monotonic() - started < 60
    assert leftover_containers(docker_client, "digits-1") == []


def test_cancel_stops_and_removes_the_container(docker_client, home, tmp_path):
    path = docker_manifest(tmp_path, SLEEPER, "compute:\n  kill_grace_seconds: 1\n")
    process = started_until_ready(path, home)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 12, err
    assert leftover_containers(docker_client, "digits-1") == []
    assert json.loads((home / "runs/digits-1/run.json").read_text())["status"] == "Canceled"


def test_a_container_removed_under_the_run_fails_it_at_once(docker_client, home, tmp_path):
    # the deadline is far away: the run must end because its container is gone, not by its clock
    path = docker_manifest(tmp_path, SLEEPER, "max_run_duration_seconds: 600\ncompute:\n  kill_grace_seconds: 1\n")
    process = started_until_ready(path, home)
    [container] = leftover_containers(docker_client, "digits-1")
    container.remove(force=True)
    removed = time.monotonic()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 10, err
    assert time.monotonic() - removed < 30
    # `docker rm -f` kills, then removes: the run sees whichever it asks about first
    assert f"container {container.name} vanished" in err or "killed by SIGKILL" in err
    assert json.loads((home / "runs/digits-1/run.json").read_text())["status"] == "Failed"


def test_a_removed_container_has_vanished_rather_than_running(docker_client):
    spec = ContainerSpec(image=BASE_IMAGE, mounts=(), user="", network_mode="none")
    name = f"tftrain-test-vanished-{os.getpid()}"
    with Container(docker_client, spec, ["sleep", "600"], {}, "/", name, {}) as container:
        read_fd, write_fd = os.pipe()
        container.start(write_fd)
        assert container.poll() is None
        docker_client.containers.get(name).remove(force=True)
        container.streamer.join(timeout=30)
        os.close(read_fd)
        with pytest.raises(Vanished, match=f"container {name} vanished"):
            container.poll()
        assert container.ended()


STUBBORN = """\
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def test_a_second_signal_kills_the_container_at_once(docker_client, home, tmp_path):
    # the script ignores SIGTERM; the grace period (120 s) is never waited out after the second Ctrl-C
    path = docker_manifest(tmp_path, STUBBORN, "compute:\n  kill_grace_seconds: 120\n")
    process = started_until_ready(path, home)
    process.send_signal(signal.SIGINT)
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, err = process.communicate(timeout=100)
    assert time.monotonic() - started < 90, "waited out the grace period"
    assert process.returncode == 12, err
    assert leftover_containers(docker_client, "digits-1") == []


def test_out_of_memory_is_reported_as_such(docker_client, cli, home, tmp_path):
    script = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n"
    result = cli("run", "-f", str(docker_manifest(tmp_path, script, "compute:\n  memory_limit: 96m\n")))
    assert result.returncode == 10, result.stderr
    assert "killed: out of memory (compute.memory_limit: 96m)" in result.stderr


def test_gpu_without_an_nvidia_runtime_fails_fast(docker_client, cli, home, tmp_path):
    result = cli("run", "-f", str(docker_manifest(tmp_path, "print('cpu')\n", "use_gpu: true\n")))
    assert result.returncode == 7
    assert "the Docker daemon has no NVIDIA runtime" in result.stderr


def test_secrets_reach_the_run_and_nothing_else(docker_client, cli, home, tmp_path, monkeypatch):
    token = "tok-" + os.urandom(8).hex()
    monkeypatch.setenv("TFTRAIN_TEST_TOKEN", token)
    script = (
        "import os\nprint('token is', os.environ['TFTRAIN_TEST_TOKEN'])\nopen('outputs/seen',"
        " 'w').write(os.environ['TFTRAIN_TEST_TOKEN'])\n"
    )
    path = docker_manifest(tmp_path, script, "secrets: [TFTRAIN_TEST_TOKEN]\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    run_dir = home / "runs/digits-1"
    assert (run_dir / "workdir/outputs/seen").read_text() == token  # the training got it
    assert "token is ***" in (run_dir / "workdir/logs/0.log").read_text()
    assert token not in result.stdout + result.stderr
    for path_ in run_dir.rglob("*"):
        if path_.is_file() and path_.name != "seen":
            assert token.encode() not in path_.read_bytes(), path_
    plan = cli("plan", "-f", str(path))
    assert token not in plan.stdout and "TFTRAIN_TEST_TOKEN='***'" in plan.stdout
    for image in docker_client.images.list(filters={"label": "tftrain.content-hash"}):
        history = json.dumps(image.history())
        assert token not in history and "TFTRAIN_TEST_TOKEN" not in history


def test_a_missing_secret_fails_in_preparing(docker_client, cli, home, tmp_path, monkeypatch):
    monkeypatch.delenv("TFTRAIN_NOT_SET", raising=False)
    result = cli("run", "-f", str(docker_manifest(tmp_path, "print(1)\n", "secrets: [TFTRAIN_NOT_SET]\n")))
    assert result.returncode == 4
    assert "secrets: TFTRAIN_NOT_SET is not set in tftrain's environment" in result.stderr


def test_files_come_back_owned_by_the_invoking_user(docker_client, home, tmp_path):
    """tftrain run by an ordinary user (uid 4242): the container runs as that user too."""
    uid = 4242
    docker_gid = os.stat("/var/run/docker.sock").st_gid
    shared = Path(subprocess.check_output(["mktemp", "-d"], text=True).strip())
    os.chmod(shared, 0o755)
    docker_manifest(shared / "project", "open('outputs/model', 'w').write('weights')\n")
    for path in [shared, *shared.rglob("*")]:
        os.chown(path, uid, uid)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(shared),
        "TFTRAIN_HOME": str(shared / "home"),
        "TFTRAIN_CACHE_DIR": str(shared / "cache"),
    }
    result = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            f"--groups={docker_gid}",
            TFTRAIN,
            "run",
            "-f",
            str(shared / "project/tftrain.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    outputs = shared / "home/runs/digits-1/workdir/outputs"
    assert (outputs / "model").stat().st_uid == uid
    assert outputs.stat().st_uid == uid
    shutil.rmtree(shared)


def test_plan_writes_a_build_context_docker_can_build(docker_client, cli, tmp_path):
    path = docker_manifest(tmp_path, "print(1)\n")
    out = tmp_path / "plan"
    result = cli("plan", "-f", str(path), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    assert "Dockerfile:" in result.stdout and "mount" in result.stdout
    assert (out / "image" / "Dockerfile").exists() and (
        out / "image" / "requirements.txt"
    ).read_text() == "scikit-learn\n"
    image, _ = docker_client.images.build(
        path=str(out / "image"), tag="tftrain-test/by-hand:latest", network_mode="host", rm=True
    )
    assert image.id


def test_images_prune_keeps_the_newest_per_model(docker_client, cli, tmp_path):
    import io

    tags = []
    for index in range(3):
        dockerfile = f"FROM {BASE_IMAGE}\nRUN echo {index} > /prune-{index}\n".encode()
        labels = {"tftrain.content-hash": f"prune{index}", "tftrain.name": "prune-test", "tftrain.version": "test"}
        tag = f"tftrain/prune-test:{index}"
        docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, labels=labels, rm=True)
        tags.append(tag)
        time.sleep(1.1)  # distinct creation times
    dry = cli("images", "prune", "--model", "prune-test", "--keep", "1", "--dry-run")
    assert f"would remove {tags[0]}" in dry.stdout and f"would remove {tags[1]}" in dry.stdout
    assert tags[2] not in dry.stdout
    result = cli("images", "prune", "--model", "prune-test", "--keep", "1")
    assert result.returncode == 0, result.stderr
    remaining = [
        t for image in docker_client.images.list(filters={"label": "tftrain.name=prune-test"}) for t in image.tags
    ]
    assert remaining == [tags[2]]
    docker_client.images.remove(tags[2])


def test_images_lists_and_prunes_serving_images_and_their_environments(docker_client, cli):
    """Serving images and the environments they are built on are tftrain's too: listed with their
    kind, pruned per model; an image something is still built on is kept with a warning, not a crash."""
    import io

    def build(tag: str, base: str, labels: dict[str, str]) -> str:
        dockerfile = f"FROM {base}\nRUN echo {tag} > /tag\n".encode()
        docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, labels=labels, rm=True)
        time.sleep(1.1)  # distinct creation times
        return tag

    environment = build("tftrain-serve/environment:prunetest", BASE_IMAGE, {"tftrain.serving.environment": "prunetest"})
    served = {"tftrain.model.name": "prune-serve", "tftrain.serving.environment": "prunetest"}
    older = build("tftrain-test/prune-serve:old", environment, {**served, "tftrain.serving.content-hash": "old"})
    child = build("tftrain-test/prune-child:1", older, {"tftrain.content-hash": "child", "tftrain.name": "prune-child"})
    newer = build("tftrain-test/prune-serve:new", environment, {**served, "tftrain.serving.content-hash": "new"})
    try:
        listing = cli("images")
        assert listing.returncode == 0, listing.stderr
        rows = {
            cells[0]: cells[1:3]
            for line in listing.stdout.splitlines()
            if len(cells := [cell.strip() for cell in line.strip("│ ").split("│")]) > 3
        }
        assert rows[environment] == ["serving environment", ""]
        assert rows[newer] == rows[older] == ["serving", "prune-serve"] and rows[child] == ["training", "prune-child"]
        result = cli("images", "prune", "--model", "prune-serve", "--keep", "1")
        assert result.returncode == 0, result.stderr
        assert f"kept {older}" in result.stdout + result.stderr  # prune-child is built on it
        assert f"removed {newer}" not in result.stdout
        docker_client.images.remove(child)
        again = cli("images", "prune", "--model", "prune-serve", "--keep", "1")
        assert f"removed {older}" in again.stdout, again.stdout
        refused = cli("images", "prune", "--keep", "0")
        assert refused.returncode == 2 and "--keep: at least 1" in refused.stderr
    finally:
        for tag in (child, older, newer, environment):
            try:
                docker_client.images.remove(tag)
            except Exception:
                pass


def test_conda_without_conda_in_the_base_says_so(docker_client, cli, home, tmp_path):
    path = docker_manifest(tmp_path, "print(1)\n", "conda_packages: [numpy]\n", name="conda")
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 8
    assert "tftrain: conda_packages / conda_dependencies_file need a base image with conda" in result.stderr


def test_shm_size_reaches_the_container(docker_client, cli, home, tmp_path):
    script = "import os\nst = os.statvfs('/dev/shm')\nprint('shm bytes', st.f_blocks * st.f_frsize)\n"
    result = cli("run", "-f", str(docker_manifest(tmp_path, script, "shm_size: 256m\n")))
    assert result.returncode == 0, result.stderr
    assert "shm bytes 268435456" in (home / "runs/digits-1/workdir/logs/0.log").read_text()
