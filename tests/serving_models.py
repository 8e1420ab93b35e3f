"""Models to serve in tests: a small Keras SavedModel (built once per session, in a process of
its own: TensorFlow never enters the test process) and registered versions in the layout the gate
leaves (model/, serving/serving.json, sample.npz, predictions.npz, version.json "serving").

    from serving_models import saved_model, register_version  # saved_model is a session fixture
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

NAME = "digits"
INPUT = "features"
OUTPUT = "output_0"
WIDTH = 64
CLASSES = 10

BUILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    import keras, tensorflow as tf
    out = Path(sys.argv[1])
    keras.utils.set_random_seed(7)
    inputs = keras.Input((64,), name="features")
    hidden = keras.layers.Dense(32, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
    model.export(str(out / "saved_model"), verbose=False)
    loaded = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"]
    rng = np.random.default_rng(3)
    sample = rng.random((4, 64)).astype("float32")
    probe = rng.random((3, 64)).astype("float32")
    np.savez(out / "sample.npz", features=sample)
    np.savez(out / "predictions.npz", **{k: v.numpy() for k, v in loaded(features=tf.constant(sample)).items()})
    np.savez(out / "probe.npz", features=probe, **{k: v.numpy() for k, v in loaded(features=tf.constant(probe)).items()})
    print(json.dumps({"tensorflow": tf.__version__}))
    """)


@dataclass(frozen=True)
class BuiltModel:
    root: Path
    tensorflow: str

    @property
    def saved_model(self) -> Path:
        return self.root / "saved_model"

    def probe(self):
        """(inputs, outputs) TensorFlow computed in the building process: 3 rows."""
        import numpy as np

        with np.load(self.root / "probe.npz") as archive:
            return archive[INPUT], archive[OUTPUT]


@pytest.fixture(scope="session")
def saved_model(tmp_path_factory) -> BuiltModel:
    root = tmp_path_factory.mktemp("served-model")
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return BuiltModel(root, json.loads(done.stdout.strip().splitlines()[-1])["tensorflow"])


def lasting_cache_path() -> Path:
    """Where tests/conftest.py's lasting_cache fixture keeps environments (for module-scoped use)."""
    return Path(os.environ.get("TFTRAIN_TEST_LASTING_CACHE", Path.home() / ".cache" / "tftrain-test"))


def register_version(
    home: Path,
    built: BuiltModel,
    name: str = NAME,
    serving: bool = True,
    source: Path | None = None,
    tensorflow: str | None = None,
    seal=None,
):
    """Register `source` (default: the SavedModel) as the next version of `name`; with `serving`,
    add the gate's files and version.json's "serving" as the contract describes; `seal`: signed
    (runner.history.sealing.Seal) as registration signs."""
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    with Store(home) as store:
        if not serving:
            return Registry(store).register(name, source or built.saved_model, None, {"framework_version": "2.18"})
        signatures = {"serve": _signature_json(), "serving_default": _signature_json()}
        document = {
            "format": "saved_model",
            "path": ".",
            "signatures": signatures,
            "signature": "serving_default",
            "tensorflow": tensorflow or built.tensorflow,
            "onnx": None,
        }
        files = home / "gate-files"
        files.mkdir(parents=True, exist_ok=True)
        (files / "serving.json").write_text(json.dumps(document, indent=2) + "\n")
        extras = {"serving/serving.json": files / "serving.json"}
        for file in ("sample.npz", "predictions.npz"):
            extras[f"serving/{file}"] = built.root / file
        info = {"framework_version": "2.18", "serving": document}
        return Registry(store).register(name, source or built.saved_model, None, info, extras, seal=seal)


def _signature_json() -> dict:
    return {
        "inputs": [{"name": INPUT, "dtype": "float32", "shape": [None, WIDTH]}],
        "outputs": [{"name": OUTPUT, "dtype": "float32", "shape": [None, CLASSES]}],
    }
