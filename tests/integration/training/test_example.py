"""The example trains a real Keras model with real TensorFlow, in a cached virtualenv."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def series(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def example(repo) -> Path:
    return repo / "examples" / "mnist-keras" / "tftrain.yml"


def test_example_trains_registers_and_is_reproducible(example, cli, home, tmp_path):
    first = cli("run", "-f", str(example))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert "registered model mnist-keras@v1" in first.stdout
    run_dir = home / "runs" / "mnist-keras-1"
    points = series(run_dir)
    test_accuracy = [p["value"] for p in points if p["name"] == "test_accuracy"]
    assert test_accuracy and test_accuracy[-1] > 0.9
    sources = {p["source"] for p in points}
    assert sources == {"log", "tensorboard"}
    epochs = [p["step"] for p in points if p["name"] == "val_accuracy" and p["source"] == "log"]
    assert epochs == list(range(1, 21))
    assert any(p["name"] == "tensorboard/validation/epoch_accuracy" for p in points)
    for key in {(p["source"], p["name"]) for p in points}:  # as they came: TensorBoard's last
        times = [p["time"] for p in points if (p["source"], p["name"]) == key]
        assert times == sorted(times), key
    summary = json.loads((run_dir / "metrics.json").read_text())
    assert summary["primary"] == "test_accuracy"
    assert (run_dir / "workdir" / "outputs" / "model" / "digits.keras").exists()
    assert (run_dir / "workdir" / "logs" / "0.log").exists()
    lock = (run_dir / "manifest.lock.yml").read_text()
    assert "tensorflow-cpu==2.18.*" in lock and "framework_version: 2.18.1" in lock

    second = cli("run", "-f", str(example))
    assert second.returncode == 0, second.stderr
    assert "(reused)" in second.stdout and "building" not in second.stdout
    assert "registered model mnist-keras@v2" in second.stdout

    models = cli("models")
    assert "mnist-keras" in models.stdout and "v1" in models.stdout and "v2" in models.stdout
    assert "test_accuracy=" in models.stdout
    pulled = cli("models", "pull", "mnist-keras@v1", "-o", str(tmp_path / "pulled"))
    assert pulled.returncode == 0, pulled.stderr
    predict = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import keras, numpy as np, sys; m = keras.models.load_model(sys.argv[1]); "
                "print(m.predict(np.zeros((1, 64)), verbose=0).shape)"
            ),
            str(tmp_path / "pulled" / "digits.keras"),
        ],
        capture_output=True,
        text=True,
    )
    assert predict.stdout.strip() == "(1, 10)", predict.stderr

    runs = cli("runs")
    assert "mnist-keras-1" in runs.stdout and "Completed" in runs.stdout
    show = cli("runs", "show", "1")
    assert "PostProcessing" in show.stdout and "outputs/model/digits.keras" in show.stdout
    markdown = cli("runs", "show", "latest", "--markdown")
    assert "| **test_accuracy** |" in markdown.stdout
    logs = cli("logs", "mnist-keras-1")
    assert "test accuracy:" in logs.stdout
    metrics = cli("metrics", "mnist-keras-1", "--json")
    assert len(metrics.stdout.splitlines()) == len(points)


RESUME = """\
import argparse, os, keras, numpy as np
from runner import log_metric
from runner.keras import MetricsCallback
parser = argparse.ArgumentParser()
parser.add_argument("--resume-from")
args = parser.parse_args()
assert args.resume_from == os.environ["TFTRAIN_RESUME_FROM"]
model = keras.models.load_model(os.path.join(args.resume_from, "digits.keras"))
x = np.random.default_rng(0).random((64, 64)).astype("float32")
y = np.arange(64) % 10
model.fit(x, y, epochs=2, verbose=0, callbacks=[MetricsCallback()])
log_metric("resumed", 1.0, step=7)
os.makedirs("outputs/model", exist_ok=True)
model.save("outputs/model/digits.keras")
"""


def test_resume_from_a_registered_model_in_the_cached_environment(example, cli, home, tmp_path):
    """Uses the example's environment (a virtualenv without tftrain): `import runner` still works."""
    assert cli("run", "-f", str(example)).returncode == 0
    source = tmp_path / "resume"
    source.mkdir()
    (source / "train.py").write_text(RESUME)
    manifest = textwrap.dedent("""\
        name: mnist-keras
        entry_script: train.py
        framework_version: "2.18"
        pip_packages: [scikit-learn]
        resume_from: model:mnist-keras@latest
        script_params:
          --resume-from: {resume_from: true}
    """)
    (source / "tftrain.yml").write_text(manifest)
    result = cli("run", "-f", str(source / "tftrain.yml"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "(reused)" in result.stdout
    points = series(home / "runs" / "mnist-keras-2")
    assert ("resumed", 1.0, 7, "file") in [(p["name"], p["value"], p["step"], p["source"]) for p in points]
    assert [p["step"] for p in points if p["name"] == "loss" and p["source"] == "file"] == [1, 2]
    assert "registered model mnist-keras@v2" in result.stdout
    registry_copy = home / "models" / "mnist-keras" / "v1" / "model" / "digits.keras"
    assert registry_copy.exists()
    assert cli("models", "pull", "mnist-keras@v1", "-o", str(tmp_path / "check")).returncode == 0
