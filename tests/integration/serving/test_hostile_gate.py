"""The model gate against what a training can leave in outputs/ (issue 24, security 2 and the Azure
Keras regression), through real `tftrain run`s:

- links that lead out of outputs/ (saved_model.pb, variables/) or into the model the gate loads are
  refused before the gate with one line naming the link (exit 28): nothing is loaded, exported or
  registered, the place they lead to is untouched, no secret shown;
- Azure's Keras how-to (model.json from model.to_json() + model.h5 from save_weights: the files
  Keras 2.15 wrote, and an older Keras 2's config) and Keras 3's model.weights.h5 pass the gate,
  loaded as the scoring script loads them, and are registered;
- files the gate cannot identify are registered with a warning, unless `gate: required` or
  `export_required: true` asks for more (exit 28).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hostile import assert_clean, assert_refused, files_containing, nothing_written_outside

from runner.errors import ModelGateError

pytestmark = pytest.mark.integration

SECRET = "gate-hostile-secret-7d2e91"  # a `secrets:` value: named in a link, shown nowhere
RUN_TIMEOUT = 300

# A real SavedModel outside the run: if the gate followed a link to it, it would pass.
ELSEWHERE = """
import sys, keras
inputs = keras.Input((8,), name="features")
keras.Model(inputs, keras.layers.Dense(3)(inputs)).export(sys.argv[1], verbose=False)
"""

LINKS = """
import os, sys
mode, elsewhere = os.environ["MODE"], os.environ.get("ELSEWHERE", "")
os.makedirs("outputs/model", exist_ok=True)
if mode == "pb":
    os.symlink(os.path.join(elsewhere, "saved_model.pb"), "outputs/model/saved_model.pb")
    os.symlink(os.path.join(elsewhere, "variables"), "outputs/model/variables")
elif mode == "variables":
    open("outputs/model/saved_model.pb", "wb").write(open(os.path.join(elsewhere, "saved_model.pb"), "rb").read())
    os.symlink(os.path.join(elsewhere, "variables"), "outputs/model/variables")
elif mode == "dir":
    os.rmdir("outputs/model")
    os.symlink(elsewhere, "outputs/model")
elif mode == "inside":
    import shutil
    shutil.copytree(elsewhere, "outputs/copy")
    os.rename("outputs/copy/saved_model.pb", "outputs/saved_model.pb")
    os.rmdir("outputs/model")
    os.rename("outputs/copy", "outputs/model")
    os.symlink("../saved_model.pb", "outputs/model/saved_model.pb")
elif mode == "newline":
    os.symlink(os.path.join(elsewhere, "variables"), "outputs/model/evil\\nvariables")
    open("outputs/model/saved_model.pb", "wb").write(open(os.path.join(elsewhere, "saved_model.pb"), "rb").read())
elif mode == "secret":
    os.symlink(os.path.join(elsewhere, "variables"), "outputs/model/" + os.environ["GATE_SECRET"])
    open("outputs/model/saved_model.pb", "wb").write(open(os.path.join(elsewhere, "saved_model.pb"), "rb").read())
print("linked", mode)
"""

# Azure's keras_mnist.py saves model.json (model.to_json()) and model.h5 (save_weights); its score.py
# runs model_from_json + load_weights. Under TF 2.18 / Keras 3 that save_weights("model.h5") raises
# ("must end in .weights.h5"): the script ran on Keras 2, whose to_json and HDF5 weights these are
# (the JSON as tf.keras 2.x writes it, the weights by the writer Keras 2's save_weights used).
KERAS = """
import json, os
import numpy as np
import keras

mode = os.environ["MODE"]
os.makedirs("outputs/model", exist_ok=True)
KERAS2_JSON = {"class_name": "Sequential", "keras_version": "2.4.0", "backend": "tensorflow", "config": {"name": "sequential", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 8], "dtype": "float32", "sparse": False, "ragged": False, "name": "dense_input"}},
    {"class_name": "Dense", "config": {"name": "dense", "trainable": True, "batch_input_shape": [None, 8], "dtype": "float32", "units": 16,
        "activation": "relu", "use_bias": True, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
        "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": None, "bias_regularizer": None,
        "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}},
    {"class_name": "Dense", "config": {"name": "dense_1", "trainable": True, "dtype": "float32", "units": 3, "activation": "softmax",
        "use_bias": True, "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
        "bias_initializer": {"class_name": "Zeros", "config": {}}, "kernel_regularizer": None, "bias_regularizer": None,
        "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}}]}}


def legacy_weights(model, path):
    import h5py
    from keras.src.legacy.saving import legacy_h5_format
    with h5py.File(path, "w") as handle:
        legacy_h5_format.save_weights_to_hdf5_group(handle, model)


if mode in ("azure", "alone"):
    from keras.src.legacy.saving import saving_utils
    model = saving_utils.model_from_config(KERAS2_JSON)
else:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3, activation="softmax")])
rng = np.random.default_rng(7)
model.set_weights([rng.normal(size=w.shape).astype("float32") for w in model.get_weights()])  # trained: not the initial values
if mode == "azure":
    open("outputs/model/model.json", "w").write(json.dumps(KERAS2_JSON))
    legacy_weights(model, "outputs/model/model.h5")
elif mode == "keras3":
    open("outputs/model/model.json", "w").write(model.to_json())
    model.save_weights("outputs/model/model.weights.h5")
elif mode == "alone":
    legacy_weights(model, "outputs/model/model.h5")
elif mode == "lambda":  # a config whose Lambda layer carries marshalled code (Keras 2's format for a lambda)
    from keras.src.utils import python_utils
    marker = os.environ["MARKER"]
    code, defaults, closure = python_utils.func_dump(lambda x: (open(marker, "w").write("ran"), x)[1])
    hostile = json.loads(json.dumps(KERAS2_JSON))
    hostile["config"]["layers"].append({"class_name": "Lambda", "config": {
        "name": "lambda", "trainable": True, "dtype": "float32", "function": [code, defaults, closure], "function_type": "lambda",
        "module": "__main__", "output_shape": None, "output_shape_type": "raw", "output_shape_module": None, "arguments": {}}})
    open("outputs/model/model.json", "w").write(json.dumps(hostile))
    legacy_weights(model, "outputs/model/model.h5")
sample = np.load("sample.npy")
np.save("outputs/expected.npy", model.predict(sample, verbose=0))
print("saved", mode)
"""


# The pair as Keras 2.15 wrote it (tests/data/keras2_azure/HOW.md), copied by the training.
KERAS2_FILES = Path(__file__).resolve().parents[2] / "data" / "keras2_azure"
COPY = """
import os, shutil
os.makedirs("outputs/model", exist_ok=True)
for name in ("model.json", "model.h5"):
    shutil.copy(os.path.join(os.environ["DATA"], name), "outputs/model")
shutil.copy(os.path.join(os.environ["DATA"], "expected.npy"), "outputs")
"""


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A loadable SavedModel outside any run (built once: TensorFlow's import is seconds)."""
    root = tmp_path_factory.mktemp("elsewhere") / "model"
    done = subprocess.run([sys.executable, "-c", ELSEWHERE, str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def _project(project, script: str, mode: str, model: str = "", extra: str = "", **variables: object) -> object:
    """tftrain.yml + src/train.py (MODE and `variables` in its environment) + src/sample.npy."""
    env = ", ".join(f"{name}: '{value}'" for name, value in {"MODE": mode, **variables}.items())
    manifest = f"environment_variables: {{{env}}}\n{extra}model:\n  path: outputs/model\n{model}"
    path = project(script, manifest, name="gated")
    np.save(path.parent / "src" / "sample.npy", np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8))
    return path


def _run(cli, path):
    return cli("run", "-f", str(path), timeout=RUN_TIMEOUT)


def _nothing_registered(home) -> None:
    models = home / "models" / "gated"
    assert not models.exists() or not any(models.iterdir())
    run = json.loads(next((home / "runs").glob("gated-*/run.json")).read_text())
    assert run["status"] == "Failed" and run["model"] is None


def _version(home) -> tuple[dict, object]:
    root = home / "models" / "gated" / "v1"
    return json.loads((root / "version.json").read_text()), root


@pytest.mark.parametrize(
    "mode, names",
    [
        ("pb", "outputs/model/saved_model.pb is a link that leads out of the outputs directory (and 1 more link)"),
        ("variables", "outputs/model/variables is a link that leads out of the outputs directory"),
        ("dir", "outputs/model is a link that leads out of the outputs directory"),
        ("inside", "outputs/model/saved_model.pb is a link: a registered version holds no links"),
        ("newline", "outputs/model/evil\\nvariables is a link that leads out"),  # one line, the name escaped
    ],
)
def test_a_link_the_gate_would_follow_is_refused_before_the_gate(project, home, cli, elsewhere, mode, names):
    path = _project(project, LINKS, mode, ELSEWHERE=elsewhere)
    with nothing_written_outside(elsewhere.parent):
        result = _run(cli, path)
    line = assert_refused(result, ModelGateError, names)
    assert (
        "model gate:" not in result.stdout and not (home / "runs" / _run_id(home) / "serving" / "serving.json").exists()
    )
    assert str(elsewhere) not in line  # where a link leads is not shown
    if mode == "newline":  # a real newline in the name, shown escaped
        assert any(
            "\n" in entry.name for entry in (home / "runs" / _run_id(home) / "workdir" / "outputs" / "model").iterdir()
        )
    _nothing_registered(home)


def _run_id(home) -> str:
    return json.loads(next((home / "runs").glob("gated-*/run.json")).read_text())["run_id"]


def test_a_link_named_after_a_secret_is_refused_without_showing_it(project, home, cli, elsewhere, monkeypatch):
    monkeypatch.setenv("GATE_SECRET", SECRET)
    path = _project(project, LINKS, "secret", extra="secrets: [GATE_SECRET]\n", ELSEWHERE=elsewhere)
    with nothing_written_outside(elsewhere.parent):
        result = _run(cli, path)
    assert_refused(result, ModelGateError, "is a link that leads out of the outputs directory")
    assert SECRET not in result.stdout + result.stderr
    assert files_containing(home, [SECRET.encode()]) == []
    _nothing_registered(home)


@pytest.mark.parametrize(
    "script, mode, weights",
    [(COPY, "keras2.15", "model.h5"), (KERAS, "azure", "model.h5"), (KERAS, "keras3", "model.weights.h5")],
)
def test_a_keras_json_with_its_weights_passes_the_gate_as_the_scoring_script_loads_it(
    project, home, cli, script, mode, weights
):
    result = _run(cli, _project(project, script, mode, "  sample_input: sample.npy\n", DATA=KERAS2_FILES))
    assert_clean(result)
    assert "model gate: keras_json loads" in result.stdout, result.stdout[-2000:]
    version, root = _version(home)
    serving = version["serving"]
    assert (serving["format"], serving["path"], serving["weights"]) == ("keras_json", "model.json", weights)
    assert sorted(p.name for p in (root / "model").iterdir()) == sorted(["model.json", weights])
    expected = np.load(home / "runs" / version["run_id"] / "workdir" / "outputs" / "expected.npy")
    with np.load(root / "serving" / "predictions.npz") as predictions:
        assert np.allclose(predictions["output_0"], expected, atol=1e-6)  # the trained weights, not a fresh model's
    from runner.serving.layout import VersionDir

    located = VersionDir(root).located()  # what `tftrain serve` loads: the same pair, in the version
    assert (located.relative, located.weights.name) == ("model.json", weights)


@pytest.mark.parametrize(
    "model, code, says",
    [
        ("", 0, "model.h5 holds weights only (no model config)"),
        ("  gate: required\n", 28, "model.h5 holds weights only (no model config)"),
    ],
)
def test_weights_without_their_json_are_registered_with_a_warning_unless_required(
    project, home, cli, model, code, says
):
    result = _run(cli, _project(project, KERAS, "alone", model))
    if code:
        assert_refused(result, ModelGateError, says, "(model.gate: required)")
        _nothing_registered(home)
    else:
        assert_clean(result)
        assert (
            says in result.stdout + result.stderr
            and "registered without the load-and-predict check" in result.stdout + result.stderr
        )
        version, root = _version(home)
        assert "serving" not in version and (root / "model" / "model.h5").is_file()


def test_a_keras_json_carrying_code_is_refused_never_run(project, home, cli, tmp_path):
    marker = tmp_path / "outside" / "ran"
    marker.parent.mkdir()
    path = _project(project, KERAS, "lambda", MARKER=marker)
    with nothing_written_outside(marker.parent):
        result = _run(cli, path)
    assert_refused(result, ModelGateError, "model.json + model.h5 does not load", "Lambda")
    assert not marker.exists()
    _nothing_registered(home)


UNKNOWN = (
    "import os\nos.makedirs('outputs/model', exist_ok=True)\nopen('outputs/model/weights.txt', 'w').write('0.5')\n"
)


@pytest.mark.parametrize(
    "model, code, says",
    [
        ("", 0, "registered without the load-and-predict check (it was not loaded"),
        (
            "  gate: required\n",
            28,
            (
                "holds no model the gate knows (a SavedModel, a .keras/.h5 model file, or a Keras JSON with its weights"
                " file) (model.gate: required)"
            ),
        ),
        ("  export: [onnx]\n  export_required: true\n", 28, "holds no model the gate knows"),
        ("  export_required: true\n", 28, "nothing to export (model.export_required: true)"),
    ],
)
def test_files_the_gate_cannot_identify(project, home, cli, model, code, says):
    result = _run(cli, _project(project, UNKNOWN, "unknown", model))
    if code:
        assert_refused(result, ModelGateError, says)
        _nothing_registered(home)
    else:
        assert_clean(result)
        assert says in result.stdout + result.stderr
        version, _ = _version(home)
        assert "serving" not in version and version["files"] == 1
