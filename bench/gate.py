"""What the model gate adds to a run: the same training (a small Keras model exported as a
SavedModel) with `model.gate: off` and with the gate on, alternating, medians of --rounds runs in
this one process; and, with --onnx, what `model.export: [onnx]` adds on top (its environment
built once before timing). Goal: the gate adds <= 3 s to a run whose model loads in <= 1 s.

    .venv/bin/python bench/gate.py [--rounds 3] [--onnx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
SCRIPT = """\
import keras
inputs = keras.Input((64,), name="features")
hidden = keras.layers.Dense(32, activation="relu")(inputs)
model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
model.export("outputs/model", verbose=False)
"""
GOAL_SECONDS = 3.0


def project(root: Path, name: str, model: str) -> Path:
    folder = root / name
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "train.py").write_text(SCRIPT)
    (folder / "tftrain.yml").write_text(f"name: {name}\nsource_directory: src\nentry_script: train.py\nmodel:\n{model}")
    return folder / "tftrain.yml"


def timed_run(manifest: Path, env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run([TFTRAIN, "run", "-f", str(manifest)], env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{manifest}: exit {done.returncode}\n{done.stderr[-2000:]}")
    home = Path(env["TFTRAIN_HOME"])
    runs = sorted((home / "runs").glob(f"{manifest.parent.name}-*"), key=lambda p: p.stat().st_mtime)
    serving = runs[-1] / "serving" / "serving.json"
    return seconds, json.loads(serving.read_text()) if serving.exists() else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--onnx", action="store_true", help="also time model.export: [onnx]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tftrain-gate-bench-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "TFTRAIN_HOME": str(root / "home"), "PYTHONPATH": str(REPO)}
        env.pop("GITHUB_ACTIONS", None)
        cases = {
            "gate off": project(root, "gate-off", "  gate: \"off\"\n"),
            "gate on": project(root, "gate-on", "  gate: auto\n"),
        }
        if args.onnx:
            cases["gate + onnx"] = project(root, "gate-onnx", "  export: [onnx]\n")
            timed_run(cases["gate + onnx"], env)  # the export environment is built once, outside the timing
        samples: dict[str, list[float]] = {name: [] for name in cases}
        loads: list[float] = []
        for _ in range(args.rounds):
            for name, manifest in cases.items():
                seconds, serving = timed_run(manifest, env)
                samples[name].append(seconds)
                if name == "gate on":
                    loads.append(serving["load_seconds"])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, value in medians.items():
        print(f"{name:14} {value:7.2f} s  (median of {args.rounds})")
    added = medians["gate on"] - medians["gate off"]
    print(f"the gate adds {added:.2f} s ({medians['gate on'] / medians['gate off']:.2f}x the run); goal <= {GOAL_SECONDS:.0f} s: "
          f"{'met' if added <= GOAL_SECONDS else 'NOT met'}; TensorFlow import + load in the gate's process: {statistics.median(loads):.2f} s")
    if args.onnx:
        print(f"model.export: [onnx] adds {medians['gate + onnx'] - medians['gate on']:.2f} s more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
