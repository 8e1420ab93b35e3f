"""The model gate on real TensorFlow: a model that loads and predicts is registered with its
signatures, sample and predictions; one that does not is refused with one line (exit 28) and
nothing is registered; model.export: [onnx] is converted by tf2onnx and checked by ONNX Runtime."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import tftrain

# Writes the model the way MODE says; runs in the tests' interpreter (TensorFlow 2.18, Keras 3).
SCRIPT = """
import os
import numpy as np
import keras
import tensorflow as tf

mode = os.environ["MODE"]
os.makedirs("outputs/model", exist_ok=True)
inputs = keras.Input((8,), name="features")
model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs))
if mode == "export":
    model.export("outputs/model", verbose=False)
elif mode == "keras":
    model.save("outputs/model/digits.keras")
elif mode == "nosig":
    module = tf.Module()
    module.f = tf.function(lambda x: x * 2.0)
    module.f(tf.constant([1.0]))
    tf.saved_model.save(module, "outputs/model")
elif mode == "broken":
    open("outputs/model/saved_model.pb", "wb").write(b"this is no protobuf")
elif mode == "lgamma":
    class Odd(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="features")])
        def __call__(self, x):
            return {"y": tf.math.lgamma(tf.abs(x) + 1.0)}
    tf.saved_model.save(Odd(), "outputs/model")
elif mode == "weights":
    open("outputs/model/weights.txt", "w").write("0.5\\n")
print("saved", mode)
"""


def _project(project, tmp_path, mode: str, model: str = "") -> tuple:
    path = project(
        SCRIPT, f"environment_variables: {{MODE: {mode}}}\nmodel:\n  path: outputs/model\n{model}", name="gated"
    )
    np.save(path.parent / "src" / "sample.npy", np.full((2, 8), 0.5, np.float32))
    np.save(path.parent / "src" / "narrow.npy", np.ones((2, 5), np.float32))
    return path


def _version(home, version: int = 1) -> dict:
    return json.loads((home / "models" / "gated" / f"v{version}" / "version.json").read_text())


def test_a_saved_model_is_registered_with_its_signature_sample_and_predictions(project, tmp_path, home):
    result = tftrain("run", "-f", str(_project(project, tmp_path, "export", "  sample_input: sample.npy\n")))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "model gate: saved_model loads in TensorFlow 2.18" in result.stdout
    serving = _version(home)["serving"]
    assert serving["signatures"]["serving_default"]["inputs"] == [
        {"name": "features", "dtype": "float32", "shape": [None, 8]}
    ]
    assert serving["sample"] == "model.sample_input" and serving["predictions"]["output_0"]["shape"] == [2, 3]
    assert serving["checked_in"].startswith("current interpreter")
    root = home / "models" / "gated" / "v1"
    with np.load(root / "serving" / "predictions.npz") as predictions:
        assert np.allclose(predictions["output_0"].sum(axis=1), 1.0)  # softmax rows
    from runner.history.checksums import sha256_file

    assert {name: sha256_file(root / name) for name in _version(home)["extras"]} == _version(home)["extras"]


def test_the_stdlib_reader_agrees_with_tensorflow(project, tmp_path, home):
    assert tftrain("run", "-f", str(_project(project, tmp_path, "export"))).returncode == 0
    from runner.serving.signature import saved_model_signatures, signatures_as_json

    recorded = _version(home)["serving"]["signatures"]
    read = signatures_as_json(saved_model_signatures(home / "models" / "gated" / "v1" / "model"))
    assert read == recorded


def test_a_keras_file_in_the_model_directory_is_checked_and_synthesised(project, tmp_path, home, machine_tmp):
    """…and nothing is left in the machine's temporary folder: TensorFlow's autograph writes a source
    file for each function it converts (the .keras model's signature) and removes it at interpreter
    exit, which the gate's process skips (os._exit): every such gate left two files in /tmp."""
    result = tftrain("run", "-f", str(_project(project, tmp_path, "keras")))
    assert result.returncode == 0, result.stderr[-2000:]
    serving = _version(home)["serving"]
    assert (serving["format"], serving["path"], serving["sample"]) == (
        "keras",
        "digits.keras",
        "synthesised from the signature",
    )
    assert sorted(path.name for path in machine_tmp.iterdir()) == []
    assert not list((home / "runs").rglob("*.tmp"))  # nor in the run, once the gate has ended


@pytest.mark.parametrize(
    "mode, model, says",
    [
        (
            "export",
            "  sample_input: narrow.npy\n",
            "model.sample_input narrow.npy: input 'features': shape (2, 5) does not match the signature's (None, 8)",
        ),
        ("nosig", "", "has no serving signature"),
        ("broken", "", "does not load"),
        (
            "weights",
            "  gate: required\n",
            (
                "model.path outputs/model holds no model the gate knows (a SavedModel, a .keras/.h5 model file, or a"
                " Keras JSON with its weights file) (model.gate: required)"
            ),
        ),
    ],
)
def test_a_model_that_fails_the_gate_is_not_registered(project, tmp_path, home, mode, model, says):
    result = tftrain("run", "-f", str(_project(project, tmp_path, mode, model)))
    assert result.returncode == 28, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error:")]
    assert len(errors) == 1 and says in errors[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not (home / "models" / "gated").exists() or not any((home / "models" / "gated").iterdir())
    run = json.loads(next((home / "runs").glob("gated-*/run.json")).read_text())
    assert run["status"] == "Failed" and run["model"] is None
    assert any((home / "runs" / run["run_id"] / "workdir" / "outputs" / "model").iterdir())  # the outputs are kept


def test_other_files_are_registered_with_a_warning_when_the_gate_is_auto(project, tmp_path, home):
    result = tftrain("run", "-f", str(_project(project, tmp_path, "weights")))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "registered without the load-and-predict check" in result.stdout + result.stderr
    assert "serving" not in _version(home)


def test_onnx_export_is_verified_by_onnx_runtime(project, tmp_path, home, lasting_cache):
    result = tftrain(
        "run",
        "-f",
        str(_project(project, tmp_path, "export", "  sample_input: sample.npy\n  export: [onnx]\n")),
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    onnx = _version(home)["serving"]["onnx"]
    assert onnx["converter"].startswith("tf2onnx ") and onnx["opset"] == 15 and onnx["max_abs_diff"] < 1e-5
    root = home / "models" / "gated" / "v1"
    assert "model.onnx" in _version(home)["extras"] and (root / "model.onnx").stat().st_size > 0
    # ONNX Runtime (in the export environment the gate built) on the kept sample, against TensorFlow's kept outputs
    from runner.environments.virtualenv import requirements_spec
    from runner.frameworks.serving import export_constraints, export_requirements

    # the environment as the gate names it: the requirements and the release's tested set
    release = onnx["tensorflow"]
    spec = requirements_spec(export_requirements(release), export_constraints(release))
    python = spec.python_path()
    check = (
        "import numpy as np, onnxruntime, sys; r = sys.argv[1]; s = np.load(r + '/serving/sample.npz'); e = np.load(r +"
        " '/serving/predictions.npz'); o = onnxruntime.InferenceSession(r + '/model.onnx',"
        " providers=['CPUExecutionProvider']).run(None, {'features': s['features']})[0]; print(float(np.abs(o -"
        " e['output_0']).max()))"
    )
    done = subprocess.run([python, "-c", check, str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout) < 1e-5


@pytest.mark.parametrize("required", [False, True])
def test_an_op_tf2onnx_cannot_convert_is_a_warning_unless_required(project, tmp_path, home, lasting_cache, required):
    model = "  export: [onnx]\n" + ("  export_required: true\n" if required else "")
    result = tftrain("run", "-f", str(_project(project, tmp_path, "lgamma", model)), timeout=1200)
    text = result.stdout + result.stderr
    assert "tf2onnx cannot convert the op Lgamma" in text, text[-3000:]
    if required:
        assert result.returncode == 28
        assert not (home / "models" / "gated").exists() or not any((home / "models" / "gated").iterdir())
    else:
        assert result.returncode == 0
        assert _version(home)["serving"]["onnx"] is None and "model.onnx" not in _version(home).get("extras", {})


SWEEP = """\
metrics: {primary: score, goal: maximize, regex: {score: 'score=([0-9.]+)'}}
sweep:
  sampling_algorithm: grid
  search_space:
    --score: {type: choice, values: [0.25, 0.75]}
"""
SCORED = SCRIPT + "import sys\nprint('score=' + sys.argv[sys.argv.index('--score') + 1])\n"


@pytest.mark.parametrize("sample, registered", [("sample.npy", True), ("narrow.npy", False)])
def test_a_sweeps_best_model_goes_through_the_gate(project, tmp_path, home, sample, registered):
    path = project(
        SCORED, f"environment_variables: {{MODE: export}}\nmodel:\n  sample_input: {sample}\n" + SWEEP, name="gated"
    )
    np.save(path.parent / "src" / "sample.npy", np.full((2, 8), 0.5, np.float32))
    np.save(path.parent / "src" / "narrow.npy", np.ones((2, 5), np.float32))
    result = tftrain("run", "-f", str(path), timeout=900)
    sweep = json.loads(next((home / "sweeps").glob("gated-sweep-*/sweep.json")).read_text())
    assert sweep["best"]["value"] == 0.75  # the book is written either way
    if registered:
        assert result.returncode == 0, result.stderr[-2000:]
        version = _version(home)
        assert version["sweep"]["params"] == {"--score": 0.75} and version["serving"]["signature"] == "serving_default"
    else:
        assert result.returncode == 28, result.stderr[-2000:]
        assert "narrow.npy: input 'features': shape (2, 5) does not match" in result.stderr
        assert not (home / "models" / "gated").exists() or not any((home / "models" / "gated").iterdir())
