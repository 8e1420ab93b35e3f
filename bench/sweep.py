"""Sweeps, measured in one run on one machine:

1. The same random sweep of the digits Keras example (examples/mnist-keras/train.py, unchanged;
   same seed, so the same trials in the same order) without early termination, with bandit
   (HyperDrive's policy) and with hyperband (Optuna's): total trial-seconds and the best value,
   each as a ratio to the sweep without. Goal: >= 40 % fewer trial-seconds at the same best value
   within noise.
2. The scheduling overhead per trial: N trials of a trivial script through the sweep against the
   same N runs started one after another by hand (`tftrain run --no-sweep` with the values).
   Goal: <= 0.3 s per trial.

    .venv/bin/python bench/sweep.py [--trials 16] [--epochs 40] [--overhead-trials 6] [--policies-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

TRIVIAL = """\
name: quick
source_directory: .
entry_script: train.py
script_params:
  --x: 1
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
    source = REPO / "examples" / "mnist-keras"
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
            f"early termination {label:10} trial-seconds {seconds:7.1f}  wall {wall:6.1f} s  best val_accuracy {best:.4f}  "
            f"stopped early {stopped}/{len(done)}"
        )
    base_seconds, base_best = results["none"]
    for label, (seconds, best) in results.items():
        if label != "none":
            print(
                f"{label:10} vs none: trial-seconds x{seconds / base_seconds:.2f} ({100 * (1 - seconds / base_seconds):.0f} % saved, goal >= 40 %), "
                f"best value x{best / base_best:.3f}"
            )
    (band_seconds, band_best), (bandit_seconds, bandit_best) = results["hyperband"], results["bandit"]
    print(f"hyperband vs bandit: trial-seconds x{band_seconds / bandit_seconds:.2f}, best value x{band_best / bandit_best:.3f}")


def overhead(root: Path, trials: int) -> None:
    folder = root / "overhead"
    folder.mkdir()
    (folder / "train.py").write_text("import sys\nprint('score:', sys.argv[-1], flush=True)\n")
    (folder / "tftrain.yml").write_text(TRIVIAL.format(trials=trials))
    started = time.perf_counter()
    tftrain("run", home=folder / "sweep-home", cwd=folder)
    swept = time.perf_counter() - started
    _, _, done = sweep_figures(folder / "sweep-home", folder)
    by_hand = 0.0
    for trial in done:  # the same values, one `tftrain run` each
        manifest = folder / f"trial-{trial['number']}.yml"
        manifest.write_text(TRIVIAL.format(trials=trials).replace("  --x: 1\n", f"  --x: {trial['params']['--x']!r}\n"))
        started = time.perf_counter()
        tftrain("run", "--no-sweep", "-f", str(manifest), home=folder / "hand-home", cwd=folder)
        by_hand += time.perf_counter() - started
    print(f"{trials} trivial trials: sweep {swept:.2f} s, one `tftrain run` after another {by_hand:.2f} s")
    print(f"scheduling overhead per trial: {(swept - by_hand) / trials:+.3f} s  (goal <= 0.3 s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--overhead-trials", type=int, default=6)
    parser.add_argument("--policies-only", action="store_true", help="only the sweeps of the Keras example (none, bandit, hyperband)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tftrain-sweep-bench-") as tmp:
        if not args.policies_only:
            overhead(Path(tmp), args.overhead_trials)
        keras_sweeps(Path(tmp), args.trials, args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
