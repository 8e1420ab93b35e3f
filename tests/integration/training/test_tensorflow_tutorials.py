"""TensorFlow's own distributed tutorials, unchanged, under `tftrain run` on TensorFlow 2.18 (Keras 3):
"Multi-worker training with Keras" (main.py byte for byte; its MNIST download swapped for synthetic
digits) on two local workers and on two Slurm nodes, and the parameter-server tutorial's Model.fit
path on a TF_CONFIG cluster. Both need tf-keras, which tftrain chooses by itself; a manifest that
turns it off gets one line naming the option, and a user-managed interpreter without tf-keras is
refused before launch."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from slurming import queued, run_example_on_slurm

pytestmark = pytest.mark.integration

# sha256 of main.py as TensorFlow's tutorial writes it (tensorflow/docs 7c36502, multi_worker_with_keras.ipynb)
TUTORIAL_MAIN = "06776daaaf2df7feb86dab2b7d7a068d13ab5567a6922a7fea19dc74cae12056"
KERAS_NOTE = (
    "keras: tf-keras (tf-keras==2.18.*, TF_USE_LEGACY_KERAS=1 for every task): Keras 3's fit cannot run under"
    " MultiWorkerMirroredStrategy"
)


def example(repo: Path, tmp_path: Path, name: str, extra: str = "") -> Path:
    copy = tmp_path / name
    shutil.copytree(repo / "examples" / name, copy)
    (copy / "tftrain.yml").write_text((copy / "tftrain.yml").read_text() + extra)
    return copy / "tftrain.yml"


def test_the_tutorials_main_py_is_unchanged(repo):
    assert (
        hashlib.sha256((repo / "examples/tf-tutorial-multi-worker/main.py").read_bytes()).hexdigest() == TUTORIAL_MAIN
    )


def test_multi_worker_tutorial_on_two_local_workers(repo, cli, home, tmp_path):
    manifest = example(repo, tmp_path, "tf-tutorial-multi-worker")
    plan = cli("plan", "-f", str(manifest))
    assert plan.returncode == 0 and KERAS_NOTE.replace("keras: ", "keras:       ") in plan.stdout, plan.stdout
    result = cli("run", "-f", str(manifest), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert result.stdout.count(KERAS_NOTE) == 1, result.stdout[-3000:]  # said once, not once per task
    logs = home / "runs/tf-tutorial-multi-worker-1/workdir/logs"
    for rank in (0, 1):
        log = (logs / f"{rank}.log").read_text()
        assert "Epoch 3/3" in log and "70/70" in log and "PerReplica" not in log, log[-2000:]


def test_multi_worker_tutorial_on_two_slurm_nodes(repo, cli, home, tmp_path, slurm_cluster):
    result, logs = run_example_on_slurm(repo, tmp_path, cli, home, "tf-tutorial-multi-worker", "node_count: 2\n")
    assert result.stdout.count(KERAS_NOTE) == 1, result.stdout[-3000:]
    for rank in (0, 1):
        log = (logs / f"{rank}.log").read_text()
        assert "Epoch 3/3" in log and "70/70" in log, log[-2000:]
    script = (home / "runs/tf-tutorial-multi-worker-1/launch/slurm.sh").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    assert queued() == []


@pytest.fixture
def tutorials_working_dir():
    """The tutorial's cells write their callbacks' files under /tmp/my_working_dir (examples' NOTICE.md):
    removed after the test when it was not there before."""
    working_dir = Path("/tmp/my_working_dir")
    there = working_dir.exists()
    yield
    if not there:
        shutil.rmtree(working_dir, ignore_errors=True)


def test_parameter_server_tutorials_fit_path(repo, cli, home, tmp_path, tutorials_working_dir):
    result = cli("run", "-f", str(example(repo, tmp_path, "tf-tutorial-parameter-server")), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert (
        "keras: tf-keras (tf-keras==2.18.*, TF_USE_LEGACY_KERAS=1 for every task): Keras 3 does not support"
        " ParameterServerStrategy" in result.stdout
    )
    chief = (home / "runs/tf-tutorial-parameter-server-1/workdir/logs/0.log").read_text()
    assert "Epoch 5/5" in chief and "20/20" in chief, chief[-2000:]


def test_turning_tf_keras_off_fails_with_one_line_naming_the_option(repo, cli, home, tmp_path):
    manifest = example(
        repo, tmp_path, "tf-tutorial-multi-worker", "environment_variables:\n  TF_USE_LEGACY_KERAS: '0'\n"
    )
    result = cli("run", "-f", str(manifest), timeout=600)
    assert result.returncode == 10, result.stdout[-3000:] + result.stderr
    assert "keras: " not in result.stdout
    assert "main.py:22: ValueError: Attempt to convert a value (PerReplica" in result.stderr
    hints = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if "environment_variables.TF_USE_LEGACY_KERAS turns tf-keras off" in line
    ]
    assert len(hints) == 1, result.stdout[-3000:]


def interpreter_without_tf_keras(tmp_path: Path) -> Path:
    """A real interpreter that sees this suite's packages (TensorFlow included) except tf-keras."""
    venv = tmp_path / "no-tf-keras"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    seen = tmp_path / "site"
    seen.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("tf_keras", "tf-keras")):
            (seen / entry.name).symlink_to(entry)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "suite.pth").write_text(f"{seen}\n")
    return venv / "bin" / "python"


def test_a_user_managed_interpreter_without_tf_keras_is_one_line_before_launch(repo, cli, home, tmp_path):
    python = interpreter_without_tf_keras(tmp_path)
    manifest = example(repo, tmp_path, "tf-tutorial-multi-worker", f"user_managed: true\npython: {python}\n")
    result = cli("run", "-f", str(manifest), timeout=300)
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and f"user_managed: {python} has TensorFlow 2.18.1 and no tf-keras" in errors[0], (
        result.stderr
    )
    assert "pip install --no-deps 'tf-keras==2.18.*'" in errors[0]
    assert not (home / "runs/tf-tutorial-multi-worker-1").exists()  # refused before the run was recorded
