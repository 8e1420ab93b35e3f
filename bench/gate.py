"""What the model gate costs a real training: a small Keras model trained for a fixed number of
epochs on synthetic data (a few seconds), exported, then gated and registered by `tftrain run`.

Modes, interleaved (each round runs every mode once, in a rotated order), --pairs rounds:
  bare   python train.py, no tftrain: the reference for the script's own time
  auto   tftrain run as it ships: the gate's process starts during the training once a CPU is idle
  never  tftrain run with TFTRAIN_GATE_PRESTART=never: it starts after the script ended
  base   (with --base-tree DIR) tftrain run with the runner package of another checkout, e.g. the
         tree before this change, where it started 3 s into every training

For each: the script's own time (its first line to its last line, from the times it prints), as
the median and as the median of its ratios to `bare` of the same round; and, for the tftrain
modes, the time from the script's last line to tftrain's exit (the gate, registration, teardown)
and how often the gate's process was started ahead (the first line of serving/check.log).
Everything is written under a temporary directory (TFTRAIN_HOME, the projects, the bytecode
cache): never into the tree measured. The machine's load (`uptime`) is printed before and after.

    .venv/bin/python bench/gate.py [--pairs 5] [--epochs 6] [--base-tree DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
SCRIPT = """\
import time
print(f"bench: first {time.time():.6f}", flush=True)
import os
import numpy as np
import keras

keras.utils.set_random_seed(1)
x = np.random.default_rng(0).random((8192, 64)).astype("float32")
y = (x[:, :32].sum(axis=1) > x[:, 32:].sum(axis=1)).astype("int32")
inputs = keras.Input((64,), name="features")
hidden = keras.layers.Dense(128, activation="relu")(inputs)
hidden = keras.layers.Dense(64, activation="relu")(hidden)
model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, epochs=int(os.environ["EPOCHS"]), batch_size=64, verbose=0)
print(f"accuracy={history.history['accuracy'][-1]:.4f}")
model.export("outputs/model", verbose=False)
print(f"bench: last {time.time():.6f}", flush=True)
"""
FIRST, LAST = re.compile(r"bench: first (\d+\.\d+)"), re.compile(r"bench: last (\d+\.\d+)")


@dataclass
class Sample:
    script: float  # the script's first line to its last
    after: float | None = None  # its last line to tftrain's exit
    ahead: bool | None = None  # the gate's process started during the training


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def project(root: Path, epochs: int) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(SCRIPT)
    (root / "tftrain.yml").write_text(
        "name: bench-gate\nsource_directory: src\nentry_script: train.py\n"
        f"environment_variables: {{EPOCHS: '{epochs}'}}\nmodel:\n  path: outputs/model\n"
    )
    return root / "tftrain.yml"


def script_seconds(output: str) -> tuple[float, float]:
    first, last = FIRST.search(output), LAST.search(output)
    if first is None or last is None:
        raise SystemExit(f"the script's times are missing from its output:\n{output[-2000:]}")
    return float(first.group(1)), float(last.group(1))


def bare(manifest: Path, env: dict[str, str], epochs: int) -> Sample:
    src = manifest.parent / "src"
    done = subprocess.run(
        [sys.executable, "train.py"],
        cwd=src,
        env={**env, "EPOCHS": str(epochs)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"bare python: exit {done.returncode}\n{done.stderr[-2000:]}")
    first, last = script_seconds(done.stdout)
    return Sample(last - first)


def tftrain(manifest: Path, env: dict[str, str]) -> Sample:
    done = subprocess.run([TFTRAIN, "run", "-f", str(manifest)], env=env, capture_output=True, text=True, timeout=1800)
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"tftrain run: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    first, last = script_seconds(done.stdout)
    runs = sorted((Path(env["TFTRAIN_HOME"]) / "runs").iterdir(), key=lambda path: path.stat().st_mtime)
    said = (runs[-1] / "serving" / "check.log").read_text().splitlines()[:1]
    ahead = bool(said) and not said[0].startswith("gate: its process started after the script ended")
    return Sample(last - first, ended - last, ahead)


def _said(name: str, sample: Sample) -> str:
    if sample.after is None:
        return f"{name} {sample.script:.2f} s"
    return (
        f"{name} {sample.script:.2f} s (+{sample.after:.2f} s after, {'ahead' if sample.ahead else 'after the script'})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="rounds, each running every mode once (default 5)")
    parser.add_argument("--epochs", type=int, default=6, help="the training's epochs (default 6: a few seconds)")
    parser.add_argument("--base-tree", type=Path, help="also time tftrain with this checkout's runner package")
    args = parser.parse_args()
    if args.pairs < 5:
        parser.error("--pairs must be at least 5")
    print(f"before: {uptime()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tftrain-gate-bench-") as tmp:
        root = Path(tmp)
        manifest = project(root / "project", args.epochs)
        base = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "TFTRAIN_GATE_PRESTART")}
        base.update(
            TFTRAIN_HOME=str(root / "home"), PYTHONPYCACHEPREFIX=str(root / "pycache"), TF_CPP_MIN_LOG_LEVEL="2"
        )
        modes = {
            "bare": lambda: bare(manifest, base, args.epochs),
            "auto": lambda: tftrain(manifest, {**base, "PYTHONPATH": str(REPO)}),
            "never": lambda: tftrain(manifest, {**base, "PYTHONPATH": str(REPO), "TFTRAIN_GATE_PRESTART": "never"}),
        }
        if args.base_tree:
            modes["base"] = lambda: tftrain(manifest, {**base, "PYTHONPATH": str(args.base_tree.resolve())})
        names = list(modes)
        modes["bare"]()  # warm the page cache and the bytecode cache, outside the timing
        samples: dict[str, list[Sample]] = {name: [] for name in names}
        for round_ in range(args.pairs):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                samples[name].append(modes[name]())
            print(f"round {round_ + 1}: " + "  ".join(_said(name, samples[name][-1]) for name in names), flush=True)
    print(f"after: {uptime()}")
    reference = [sample.script for sample in samples["bare"]]
    print(f"\nthe script's own time (first line to last), medians of {args.pairs} interleaved rounds:")
    for name in names:
        times = [sample.script for sample in samples[name]]
        ratio = statistics.median(value / ref for value, ref in zip(times, reference))
        line = (
            f"  {name:6} {statistics.median(times):6.2f} s  ×{ratio:.3f} of bare (paired median; rounds"
            f" {min(times):.2f}–{max(times):.2f} s)"
        )
        if name != "bare":
            after = statistics.median(sample.after for sample in samples[name])
            ahead = sum(bool(sample.ahead) for sample in samples[name])
            line += f"; after its last line {after:.2f} s; gate started ahead in {ahead} of {args.pairs}"
        print(line)
    if "auto" in samples:
        paired = statistics.median(a.script / n.script for a, n in zip(samples["auto"], samples["never"]))
        print(f"  auto/never: ×{paired:.3f} (paired median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
