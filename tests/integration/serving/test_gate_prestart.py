"""The gate's process during the training (runner.serving.prestart, check_process.Warming), for real:
on a busy machine (every CPU tftrain may use taken by a burner this test starts, beside the
training) it is not started until the script ended; on an idle one (the reading given) it starts
during the training; the gate's result is the same either way."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
from conftest import REPO, tftrain
from serving_models import saved_model  # noqa: F401 (a fixture)

from runner.serving.check_process import Warming
from runner.serving.prestart import CpuTimes

# A real training (a few seconds of fit on synthetic data); its last lines say whether a gate
# process of the tftrain that runs it (a child of one of its ancestors) existed while it trained.
TRAINING = """
import os, time
import numpy as np
import keras

keras.utils.set_random_seed(1)
x = np.random.default_rng(0).random((2048, 32)).astype("float32")
y = (x.sum(axis=1) > 16).astype("int32")
inputs = keras.Input((32,), name="features")
model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.Dense(64, activation="relu")(inputs)))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
started = time.monotonic()
while time.monotonic() - started < float(os.environ["TRAIN_SECONDS"]):
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)
model.export("outputs/model", verbose=False)

def parent(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("PPid:")))

ancestors, pid = set(), os.getpid()
while pid > 1:
    pid = parent(pid)
    ancestors.add(pid)
gates = 0
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
            if b"runner.serving.model_check" in cmdline.read() and parent(int(entry)) in ancestors:
                gates += 1
    except (OSError, ValueError, StopIteration):
        pass
print(f"gate processes while training: {gates}")
"""


@contextmanager
def burners():
    """A busy loop on every CPU tftrain may use (at normal priority, as another job would be)."""
    started = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        time.sleep(1.0)  # at full speed before anything is measured
        yield
    finally:
        for process in started:
            process.kill()
            process.wait()


def idle_machine():
    """Readings of a machine whose one CPU is idle all the time."""
    ticks = itertools.count(0, 100)

    def sample() -> CpuTimes:
        now = next(ticks)
        return CpuTimes(time.monotonic(), {0: (now, now)}, (), 8 << 30)

    return sample


def _check(warming: Warming, model, out: Path) -> tuple[dict, dict, str]:
    out.mkdir()
    args = ["check", str(model.saved_model), str(out), "--sample", str(model.root / "sample.npz")]
    assert warming.run(args, out / "check.log", 600) == 0, (out / "check.log").read_text()[-3000:]
    serving = json.loads((out / "serving.json").read_text())
    serving.pop("load_seconds")
    with np.load(out / "predictions.npz") as predictions:
        outputs = {name: predictions[name] for name in predictions.files}
    return serving, outputs, (out / "check.log").read_text().splitlines()[0]


def test_idle_machine_starts_it_during_the_training_busy_one_after_with_the_same_result(saved_model, tmp_path):  # noqa: F811
    with Warming(sys.executable, REPO, tmp_path / "idle-warm.log", after=0.2, sample=idle_machine()) as warming:
        deadline = time.monotonic() + 30
        while not (tmp_path / "idle-warm.log").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the training runs
        assert (tmp_path / "idle-warm.log").exists(), "not started ahead on an idle machine"
        ahead = _check(warming, saved_model, tmp_path / "idle")
    assert re.match(
        r"gate: its process started \d+\.\d s into the training, at the lowest priority: 1\.0 of 1 CPUs idle over"
        r" \d\.\d s",
        ahead[2],
    ), ahead[2]

    with burners(), Warming(sys.executable, REPO, tmp_path / "busy-warm.log", after=0.2) as warming:
        time.sleep(5.0)  # the training runs: the machine is read five times
        assert not (tmp_path / "busy-warm.log").exists(), "started ahead on a busy machine"
        after = _check(warming, saved_model, tmp_path / "busy")
    assert after[2].startswith(
        "gate: its process started after the script ended: no CPU was idle while the training ran (at most 0."
    )

    assert ahead[0] == after[0]
    assert ahead[1].keys() == after[1].keys() and all(
        np.array_equal(ahead[1][name], after[1][name]) for name in ahead[1]
    )


def _run(project, busy: bool):
    manifest = project(
        TRAINING, "environment_variables: {TRAIN_SECONDS: '6'}\nmodel:\n  path: outputs/model\n", name="prestart"
    )
    with burners() if busy else nullcontext():
        result = tftrain("run", "-f", str(manifest))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_a_training_on_a_busy_machine_never_runs_beside_the_gates_process(project, home):
    result = _run(project, busy=True)
    assert "gate processes while training: 0" in result.stdout
    (run,) = (home / "runs").iterdir()
    first = (run / "serving" / "check.log").read_text().splitlines()[0]
    assert first.startswith(
        "gate: its process started after the script ended: no CPU was idle while the training ran"
    ), first
    assert "gate: its process" not in result.stdout  # the log says it, not the console
    version = json.loads((home / "models" / "prestart" / "v1" / "version.json").read_text())
    assert version["serving"]["signatures"]["serving_default"]["inputs"] == [
        {"name": "features", "dtype": "float32", "shape": [None, 32]}
    ]


def test_never_waits_for_the_script_whatever_the_machine(project, home, monkeypatch):
    monkeypatch.setenv("TFTRAIN_GATE_PRESTART", "never")
    result = _run(project, busy=False)
    assert "gate processes while training: 0" in result.stdout
    (run,) = (home / "runs").iterdir()
    assert (run / "serving" / "check.log").read_text().splitlines()[
        0
    ] == "gate: its process started after the script ended: TFTRAIN_GATE_PRESTART=never"
