"""Azure ML training scripts, unchanged: `from azureml.core import Run`, `run.log` per epoch,
argparse `--data-folder`, outputs in ./outputs — run by tftrain with the compatibility layer."""

from __future__ import annotations

import gzip
import json
import struct
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import BASE_IMAGE

pytestmark = pytest.mark.integration

AZURE_MNIST = """\
import argparse
import gzip
import os
import struct
import zlib

import numpy as np
import tensorflow as tf
from azureml.core import Run

parser = argparse.ArgumentParser()
parser.add_argument("--data-folder", type=str, dest="data_folder", help="data folder mounting point")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--resume-from", type=str, dest="resume_from", default=None)
args = parser.parse_args()


def load(path, images):
    with gzip.open(path, "rb") as handle:
        if images:
            _, count, rows, cols = struct.unpack(">IIII", handle.read(16))
            return np.frombuffer(handle.read(), np.uint8).reshape(count, rows * cols) / 255.0
        _, count = struct.unpack(">II", handle.read(8))
        return np.frombuffer(handle.read(), np.uint8)


X = load(os.path.join(args.data_folder, "train-images-idx3-ubyte.gz"), True)
y = load(os.path.join(args.data_folder, "train-labels-idx1-ubyte.gz"), False)
run = Run.get_context()
print("run", run.id, "experiment", run.experiment.name, "inputs", sorted(run.input_datasets), "shape", X.shape, flush=True)

model = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(10, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
checkpoint = tf.train.Checkpoint(model=model, epoch=tf.Variable(0))
start = 0
if args.resume_from:
    checkpoint.restore(tf.train.latest_checkpoint(os.path.join(args.resume_from, "checkpoints"))).expect_partial()
    start = int(checkpoint.epoch.numpy())
    print(f"resumed from epoch {start}", flush=True)
manager = tf.train.CheckpointManager(checkpoint, "./outputs/model/checkpoints", max_to_keep=2)


class LogToAzure(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        run.log("loss", logs["loss"])
        run.log("accuracy", logs["accuracy"])
        checkpoint.epoch.assign(epoch + 1)
        manager.save()


history = model.fit(X, y, epochs=start + args.epochs, initial_epoch=start, batch_size=64, verbose=0, callbacks=[LogToAzure()])
run.log_list("class_counts", np.bincount(y, minlength=10).tolist())
run.log_row("final", loss=history.history["loss"][-1], accuracy=history.history["accuracy"][-1])
run.tag("data", "mnist-idx")
run.set_tags({"framework": "tensorflow"})


def png(path):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = zlib.compress(b"\\x00\\xff\\x00\\x00")
    with open(path, "wb") as handle:
        handle.write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


png("sample.png")
run.log_image("sample", path="sample.png")
with open("summary.txt", "w") as handle:
    handle.write(f"accuracy {history.history['accuracy'][-1]:.3f}")
run.upload_file("outputs/summary.txt", "summary.txt")
model.export("./outputs/model/saved")
print("files", run.get_file_names(), "metrics", sorted(run.get_metrics()), flush=True)
run.complete()
"""

MANIFEST = """\
name: azure-mnist
entry_script: train.py
script_params:
  --data-folder: {input: mnist}
  --epochs: 3
inputs:
  mnist: {source: data}
metrics: {primary: accuracy}
"""


def write_idx(folder: Path, count: int = 512) -> None:
    """MNIST's own file format (idx, gzipped), with digits a model can learn: label k lights row band k."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, count).astype(np.uint8)
    images = rng.integers(0, 40, (count, 28, 28)).astype(np.uint8)
    for index, label in enumerate(labels):
        images[index, label * 2 + 3 : label * 2 + 6, 4:24] = 255
    folder.mkdir(parents=True)
    with gzip.open(folder / "train-images-idx3-ubyte.gz", "wb") as handle:
        handle.write(struct.pack(">IIII", 0x803, count, 28, 28) + images.tobytes())
    with gzip.open(folder / "train-labels-idx1-ubyte.gz", "wb") as handle:
        handle.write(struct.pack(">II", 0x801, count) + labels.tobytes())


def azure_project(root: Path, script: str = AZURE_MNIST, manifest: str = MANIFEST) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text(script)
    (root / "tftrain.yml").write_text(manifest)
    return root / "tftrain.yml"


def test_an_unchanged_azure_script_trains_reports_and_resumes(cli, home, tmp_path):
    manifest = azure_project(tmp_path / "azure")
    write_idx(tmp_path / "azure" / "data")
    result = cli("run", "-f", str(manifest), timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    assert "azureml compatibility: on (train.py imports azureml and the Azure ML SDK is not installed)" in result.stdout
    run_dir = home / "runs" / "azure-mnist-1"
    log = (run_dir / "workdir/logs/0.log").read_text()
    assert "run azure-mnist-1 experiment azure-mnist inputs ['mnist'] shape (512, 784)" in log
    summary = json.loads((run_dir / "metrics.json").read_text())
    metrics = summary["metrics"]
    assert summary["primary"] == "accuracy" and metrics["accuracy"]["count"] == 3 and metrics["loss"]["count"] == 3
    assert metrics["accuracy"]["last"] > 0.5  # it learned the bands
    assert metrics["class_counts"]["count"] == 10 and {"final.loss", "final.accuracy"} <= metrics.keys()
    assert summary["images"] == [{"name": "sample", "path": "outputs/images/sample.png", "rank": 0}]
    assert summary["tags"] == {"data": "mnist-idx", "framework": "tensorflow"}
    outputs = run_dir / "workdir/outputs"
    assert (outputs / "summary.txt").read_text().startswith("accuracy ")
    assert (outputs / "images/sample.png").read_bytes().startswith(b"\x89PNG")
    assert "'outputs/summary.txt'" in log and "files" in log
    markdown = (run_dir / "summary.md").read_text()
    assert "`outputs/images/sample.png` (sample)" in markdown and "`data`=mnist-idx" in markdown
    assert "registered model azure-mnist@v1" in result.stdout

    resumed = manifest.read_text().replace("  --epochs: 3\n", "  --epochs: 2\n  --resume-from: {resume_from: true}\n")
    manifest.write_text(resumed + "resume_from: azure-mnist-1\n")
    result = cli("run", "-f", str(manifest), timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    assert "resumed from epoch 3" in (home / "runs/azure-mnist-2/workdir/logs/0.log").read_text()
    assert json.loads((home / "runs/azure-mnist-2/metrics.json").read_text())["metrics"]["accuracy"]["count"] == 2


def small(tmp_path: Path, script: str, extra: str = "") -> Path:
    return azure_project(tmp_path / "small", textwrap.dedent(script), f"name: small\nentry_script: train.py\n{extra}")


def test_an_unsupported_call_fails_naming_it_and_the_alternative(cli, home, tmp_path):
    manifest = small(
        tmp_path,
        """\
        from azureml.core.run import Run
        run = Run.get_context()
        run.log("accuracy", 0.9)
        run.log_confusion_matrix("cm", {"schema_type": "confusion_matrix"})
        """,
    )
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 10
    assert (
        "train.py:4: NotImplementedError: Run.log_confusion_matrix is not supported by tftrain's azureml compatibility"
        " layer" in result.stderr
    )
    assert "log the numbers with run.log_list/log_row" in result.stderr
    # nothing lost
    assert json.loads((home / "runs/small-1/metrics.json").read_text())["metrics"]["accuracy"]["last"] == 0.9


def test_run_fail_fails_the_run_even_when_the_script_exits_0(cli, home, tmp_path):
    manifest = small(
        tmp_path,
        """\
        from azureml.core import Run
        Run.get_context().fail(error_details="labels are corrupt")
        print("exiting normally")
        """,
    )
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 10
    assert "the script marked the run failed (run.fail()): labels are corrupt" in result.stderr


def test_compat_none_leaves_the_import_to_fail(cli, home, tmp_path):
    manifest = small(tmp_path, "from azureml.core import Run\n", "compat: none\n")
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 10 and "ModuleNotFoundError: No module named 'azureml'" in result.stderr
    assert "azureml compatibility" not in result.stdout


def test_every_task_of_a_distributed_job_gets_the_layer(cli, home, tmp_path):
    manifest = small(
        tmp_path,
        """\
        import json, os, time
        from azureml.core import Run
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        Run.get_context().log(f"{task['type']}_alive", 1)
        open(f"{task['type']}.alive", "w").close()
        if task["type"] == "chief":  # the job ends with the chief: it waits for the others, as real training does
            deadline = time.time() + 120
            while not all(os.path.exists(f"{t}.alive") for t in ("worker", "ps")) and time.time() < deadline:
                time.sleep(0.1)
        if task["type"] == "ps":
            time.sleep(600)  # parameter servers never end; tftrain stops them
        """,
        "distributed_training: {backend: parameter_server, worker_count: 1, parameter_server_count: 1}\n"
        "compute: {slots_per_node: 3}\nmetrics: {ranks: [0, 1, 2]}\n",
    )
    result = cli("run", "-f", str(manifest))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    metrics = json.loads((home / "runs/small-1/metrics.json").read_text())["metrics"]
    assert {"chief_alive", "worker_alive", "ps_alive"} <= metrics.keys()


def test_the_layer_reaches_a_container(docker_client, cli, home, tmp_path):
    manifest = small(
        tmp_path,
        """\
        from azureml.core import Run
        run = Run.get_context()
        run.log("accuracy", 0.75)
        run.upload_file("outputs/note.txt", __file__)
        """,
        f"compat: azureml\nuse_docker: true\ncustom_docker_image: {BASE_IMAGE}\n",
    )
    result = cli("run", "-f", str(manifest), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "azureml compatibility: on (compat: azureml)" in result.stdout
    assert json.loads((home / "runs/small-1/metrics.json").read_text())["metrics"]["accuracy"]["last"] == 0.75
    assert (home / "runs/small-1/workdir/outputs/note.txt").read_text().startswith("from azureml.core import Run")
