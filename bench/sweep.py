"""Sweeps, measured in one run on one machine:

1. The same random sweep of the digits Keras example (examples/mnist-keras/train.py, unchanged, in
   a scratch copy; same seed, so the same trials in the same order) without early termination, with
   bandit (HyperDrive's policy) and with hyperband (Optuna's): total trial-seconds and the best
   value, each as a ratio to the sweep without. Goal: >= 40 % fewer trial-seconds at the same best
   value within noise.
2. The scheduling overhead per trial, on the real path: N trials of a small Keras script (its model
   exported, gated with `gate: required`; the best trial's registered) through the sweep, against
   the same N values run one after another by hand as `tftrain run --no-sweep` (each gated and
   registered), and as bare `python train.py` (the reference): interleaved, the order rotating, at
   least 5 rounds; medians of the paired ratios, both comparisons printed, the load beside them.
   Goal: <= 0.3 s per trial against the `tftrain run`s.

Everything is written under a temporary directory, never into this tree.

    .venv/bin/python bench/sweep.py [--trials 16] [--epochs 40] [--overhead-trials 4] [--rounds 5] [--overhead-only |
    --policies-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paired import MIN_ROUNDS, at_least, interleaved, load, report

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
POLICY = "  early_termination: {type: bandit, slack_factor: 0.1, evaluation_interval: 1, delay_evaluation: 3}\n"
HYPERBAND = "  early_termination: {{type: hyperband, min_resource: 3, max_resource: {epochs}, reduction_factor: 3}}\n"

KERAS = """\
name: digits
source_directory: {source}
entry_script: train.py
script_params:
  --epochs: {epochs}
metrics:
  primary: val_accuracy
  goal: maximize
sweep:
  sampling_algorithm: {{type: random, seed: 11}}
  search_space:
    --learning-rate: {{type: loguniform, min_value: -10, max_value: -4}}
    --hidden-units: {{type: choice, values: [4, 8, 16, 64]}}
    --batch-size: {{type: choice, values: [16, 32, 64]}}
  limits: {{max_total_trials: {trials}, max_concurrent_trials: 2}}
{policy}"""

TRIAL = """\
import argparse, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras, numpy as np
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, default=1.0)
args = parser.parse_args()
keras.utils.set_random_seed(0)
data = np.random.default_rng(0).random((512, 16), dtype=np.float32)
layers = [keras.Input((16,), name="features"), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
model = keras.Sequential(layers)
model.compile("sgd", "mse")
model.fit(data, data.sum(axis=1) * args.x, epochs=2, verbose=0)
model.export("outputs/model", verbose=False)
print("score:", args.x, flush=True)
"""

SMALL = """\
name: quick
source_directory: src
entry_script: train.py
script_params:
  --x: {x}
model: {{path: outputs/model, gate: required}}
metrics:
  regex:
    score: 'score: ([0-9.]+)'
sweep:
  sampling_algorithm: {{type: random, seed: 5}}
  search_space:
    --x: {{type: uniform, min_value: 0, max_value: 1}}
  objective: {{primary_metric: score, goal: maximize}}
  limits: {{max_total_trials: {trials}, max_concurrent_trials: 1}}
"""


def tftrain(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TFTRAIN_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("GITHUB_ACTIONS", None)
    result = subprocess.run([TFTRAIN, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"tftrain {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def sweep_figures(home: Path, cwd: Path) -> tuple[float, float, list[dict]]:
    """(trial-seconds, best value, trials) of the sweep just run in `home`."""
    document = json.loads(tftrain("sweeps", "show", "latest", "--json", home=home, cwd=cwd).stdout)
    seconds = 0.0
    for trial in document["trials"]:
        record = json.loads((home / "runs" / trial["run_id"] / "run.json").read_text())
        seconds += record["ended"] - record["created"]
    return seconds, document["best"]["value"], document["trials"]


def keras_sweeps(root: Path, trials: int, epochs: int) -> None:
    source = root / "mnist-keras"  # a scratch copy: nothing is written into the tree
    shutil.copytree(REPO / "examples" / "mnist-keras", source)
    results = {}
    policies = (("none", ""), ("bandit", POLICY), ("hyperband", HYPERBAND.format(epochs=epochs)))
    for label, policy in policies:
        folder = root / label
        folder.mkdir()
        (folder / "tftrain.yml").write_text(KERAS.format(source=source, epochs=epochs, trials=trials, policy=policy))
        started = time.perf_counter()
        tftrain("run", home=folder / "home", cwd=folder)
        wall = time.perf_counter() - started
        seconds, best, done = sweep_figures(folder / "home", folder)
        stopped = sum(1 for t in done if t["early_terminated"])
        results[label] = (seconds, best)
        print(
            f"early termination {label:10} trial-seconds {seconds:7.1f}  wall {wall:6.1f} s  best val_accuracy"
            f" {best:.4f}  stopped early {stopped}/{len(done)}"
        )
    base_seconds, base_best = results["none"]
    for label, (seconds, best) in results.items():
        if label != "none":
            print(
                f"{label:10} vs none: trial-seconds x{seconds / base_seconds:.2f}"
                f" ({100 * (1 - seconds / base_seconds):.0f} % saved, goal >= 40 %), best value x{best / base_best:.3f}"
            )
    (band_seconds, band_best), (bandit_seconds, bandit_best) = results["hyperband"], results["bandit"]
    print(
        f"hyperband vs bandit: trial-seconds x{band_seconds / bandit_seconds:.2f}, best value"
        f" x{band_best / bandit_best:.3f}"
    )


def overhead(root: Path, trials: int, rounds: int) -> None:
    folder = root / "overhead"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "train.py").write_text(TRIAL)
    (folder / "tftrain.yml").write_text(SMALL.format(x=1, trials=trials))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    tftrain("run", home=folder / "sweep-home", cwd=folder)  # not timed: the environment built, the values drawn
    _, _, done = sweep_figures(folder / "sweep-home", folder)
    values = [trial["params"]["--x"] for trial in done]
    manifests = []
    for number, value in enumerate(values):
        manifest = folder / f"trial-{number}.yml"
        manifest.write_text(SMALL.format(x=repr(value), trials=trials))
        manifests.append(manifest)

    def by_hand() -> None:
        for manifest in manifests:
            tftrain("run", "--no-sweep", "-f", str(manifest), home=folder / "hand-home", cwd=folder)

    def bare() -> None:
        for value in values:
            scratch = Path(tempfile.mkdtemp(dir=folder, prefix="bare-"))
            shutil.copy(folder / "src" / "train.py", scratch / "train.py")
            result = subprocess.run(
                [sys.executable, "train.py", "--x", repr(value)], cwd=scratch, env=env, capture_output=True, text=True
            )
            if result.returncode != 0:
                raise SystemExit(f"python train.py --x {value}: exit {result.returncode}: {result.stderr[-2000:]}")
            shutil.rmtree(scratch)

    variants = {
        "python train.py": bare,
        "tftrain run": by_hand,
        "sweep": lambda: tftrain("run", home=folder / "sweep-home", cwd=folder),
    }
    print(
        f"{trials} trials of a small Keras script (gated; each run and the sweep's best registered); load before:"
        f" {load()}",
        flush=True,
    )
    seconds = interleaved(variants, rounds)
    versions = len(list((folder / "hand-home" / "models" / "quick").glob("v*/version.json")))
    swept = len(list((folder / "sweep-home" / "models" / "quick").glob("v*/version.json")))
    if versions != rounds * trials or swept != rounds + 1:
        raise SystemExit(
            f"expected {rounds * trials} versions by hand and {rounds + 1} by the sweeps; found {versions} and {swept}"
        )
    print(f"load after: {load()}")
    print(f"times are for all {trials} trials of a round; against bare Python, the reference:")
    report(
        {name: seconds[name] for name in ("python train.py", "tftrain run", "sweep")},
        reference="python train.py",
        per=trials,
        unit="trial",
    )
    print(
        "the sweep against the same trials as `tftrain run`s (goal: <= +0.3 s per trial; by hand every run is gated,"
        " the sweep gates its best):"
    )
    report(
        {name: seconds[name] for name in ("tftrain run", "sweep")}, reference="tftrain run", per=trials, unit="trial"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--overhead-trials", type=int, default=4)
    parser.add_argument(
        "--rounds",
        type=at_least,
        default=MIN_ROUNDS,
        help=f"rounds of the overhead's comparison (at least {MIN_ROUNDS})",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument(
        "--policies-only", action="store_true", help="only the sweeps of the Keras example (none, bandit, hyperband)"
    )
    only.add_argument("--overhead-only", action="store_true", help="only the scheduling overhead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tftrain-sweep-bench-") as tmp:
        if not args.policies_only:
            overhead(Path(tmp), args.overhead_trials, args.rounds)
        if not args.overhead_only:
            keras_sweeps(Path(tmp), args.trials, args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
