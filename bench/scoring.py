"""The scoring-script path of bench/serve.py (`--scoring`): a registered version whose scoring
script loads the bench's SavedModel through Model.get_model_path, served by `tftrain serve` on
azmlinfsrv; the baseline is the same script's run() called in-process (init() once) on the same
sample, in the same scoring environment, in the same bench run."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

SCRIPT = """
import json
import numpy as np
import tensorflow as tf
from azureml.core.model import Model


def init():
    global predict
    predict = tf.saved_model.load(Model.get_model_path("{name}")).signatures["serving_default"]


def run(raw_data):
    data = np.asarray(json.loads(raw_data)["data"], dtype=np.float32)
    return predict(features=tf.constant(data))["output_0"].numpy().tolist()
"""
PACKAGES = ["numpy"]  # the example's (examples/azure-keras-scoring): one environment for both
SAMPLE = json.dumps({"data": [[0.5] * 64]})
IN_PROCESS = """
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("entry_module", sys.argv[1])
script = importlib.util.module_from_spec(spec); spec.loader.exec_module(script)
script.init()
body = sys.argv[3]
for _ in range(200): script.run(body)
times, end = [], time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    started = time.perf_counter(); script.run(body); times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def register_scoring_version(home: Path, model, name: str) -> None:
    """The bench's SavedModel registered as `name`@v1 with a scoring script, as the gate leaves one."""
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    scratch = Path(tempfile.mkdtemp(prefix="tftrain-bench-scoring-"))
    (scratch / "score.py").write_text(SCRIPT.replace("{name}", name))
    serving = {
        "tensorflow": model.tensorflow,
        "scoring": {"script": "score.py", "packages": PACKAGES, "auth": False, "layout": "directory"},
    }
    (scratch / "serving.json").write_text(json.dumps(serving))
    with Store(home) as store:
        Registry(store).register(
            name,
            model.saved_model,
            None,
            {"framework_version": model.tensorflow, "serving": serving},
            {"scoring/score.py": scratch / "score.py", "serving/serving.json": scratch / "serving.json"},
        )


def in_process(model, version_dir: Path, name: str, seconds: float) -> list[float]:
    """run()'s latencies called in-process, in the scoring environment, with the server's variables."""
    from runner.environments import scoring_spec
    from runner.serving.scoring.script import model_variables, shims

    python = scoring_spec(model.tensorflow, tuple(PACKAGES)).python_path()
    repo = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": f"{shims(repo)}:{repo}",
        **model_variables(version_dir / "model", name, 1),
    }
    done = subprocess.run(
        [python, "-c", IN_PROCESS, str(version_dir / "scoring" / "score.py"), str(seconds), SAMPLE],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def scoring_env(model, version_dir: Path, name: str) -> tuple[str, dict[str, str]]:
    """The scoring environment's Python and the variables a server of the version runs with."""
    from runner.environments import scoring_spec
    from runner.serving.scoring.script import model_variables, shims

    python = scoring_spec(model.tensorflow, tuple(PACKAGES)).python_path()
    repo = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": f"{shims(repo)}:{repo}",
        "PYTHONUNBUFFERED": "1",
        **model_variables(version_dir / "model", name, 1),
    }
    return str(python), env


def start_plain(model, version_dir: Path, name: str, port: int) -> subprocess.Popen:
    """Azure's own server on the script, as Azure starts it (`azmlinfsrv --entry_script`): no guard, no front."""
    python, env = scoring_env(model, version_dir, name)
    script = version_dir / "scoring" / "score.py"
    return subprocess.Popen(
        [str(Path(python).parent / "azmlinfsrv"), "--entry_script", str(script), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env, "AML_APP_ROOT": str(script.parent)},
    )


def start_direct(model, version_dir: Path, name: str, port: int) -> subprocess.Popen:
    """tftrain's scoring server (runner.serving.scoring.server) alone, its output discarded: no tftrain serve relaying
    it."""
    python, env = scoring_env(model, version_dir, name)
    return subprocess.Popen(
        [
            python,
            "-m",
            "runner.serving.scoring.server",
            "--model-dir",
            str(version_dir),
            "--name",
            name,
            "--version",
            "1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
