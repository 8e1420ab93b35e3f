"""How much `tftrain run` adds to a training job.

Runs the same fixed CPU-bound training bare (`python train.py`) and under `tftrain run`,
alternating, and prints the ratio of medians. Goal: ≤ 1.02 on a ~60 s job and ≤ 1 s added.

    .venv/bin/python bench/overhead.py            # ~60 s job, 3 rounds (about 6 minutes)
    .venv/bin/python bench/overhead.py --quick    # ~8 s job, 3 rounds
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")


def timed(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=HERE / "workloads")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a ~8 s job instead of ~60 s")
    args = parser.parse_args()
    epochs = "12" if args.quick else "165"
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "tftrain.yml"
        manifest.write_text(
            f"name: overhead\nsource_directory: {HERE / 'workloads'}\nentry_script: cpu_train.py\n"
            f"script_params:\n  --epochs: {epochs}\n"
        )
        env = {**os.environ, "TFTRAIN_HOME": str(Path(tmp) / "home"), "PYTHONUNBUFFERED": "1"}
        bare_argv = [sys.executable, "cpu_train.py", "--epochs", epochs]
        run_argv = [TFTRAIN, "run", "-f", str(manifest)]
        bare, under = [], []
        for round_no in range(args.rounds):
            bare.append(timed(bare_argv, env))
            under.append(timed(run_argv, env))
            print(f"round {round_no + 1}: bare {bare[-1]:.2f}s  tftrain {under[-1]:.2f}s", flush=True)
    b, u = statistics.median(bare), statistics.median(under)
    paired = statistics.median(t - s for s, t in zip(bare, under))  # each round's pair ran back to back
    spread = max(bare) - min(bare)
    print(f"median bare {b:.2f}s, under tftrain run {u:.2f}s (bare runs vary by {spread:.2f}s here)")
    print(f"ratio {u / b:.3f} (goal ≤ 1.02), added {u - b:+.2f}s; median of paired differences {paired:+.2f}s (goal ≤ 1 s)")


if __name__ == "__main__":
    main()
