"""tftrain on a GPU: a Keras image classification (bench/workloads/gpu_train.py, a small ResNet-ish CNN on
synthetic 32x32x3 images) through `tftrain run` with `use_gpu: true` on the local target, in the curated
environment tftrain builds (tensorflow[and-cuda] of framework_version, its tested set), against the same
script run bare with that environment's python; interleaved, the order rotating, at least 5 pairs,
medians, the load beside them. Prints:

- images/s, tftrain/bare (the median paired ratio; goal ≥ 0.98), and each variant's wall time;
- the GPU utilisation and peak memory tftrain recorded (run.json usage.gpus, NVML every 5 s) beside
  nvidia-smi's own sampling (-lms 500) during the same run;
- the first-line overhead: launch → the script's first line, `tftrain run` against `python train.py`.

Without a GPU (no nvidia-smi, nvidia-smi failing, or TensorFlow seeing none in the built environment)
it exits 1 with one line (`no GPU: …`), never a figure. `--cpu-harness` runs the same harness with use_gpu: false and
tensorflow-cpu, to check the harness on a machine without one: its figures are no GPU figures.

Everything is written under a temporary directory (the run's home, the bare runs' copies, the logs);
tftrain's environment goes to its cache (~/.cache/tftrain/envs) as in any run. Run with the python of
a tftrain installed with the `gpu` extra (nvidia-ml-py: without it tftrain records no GPU usage):

    python bench/gpu.py --budget-seconds 540          # a GPU machine: ~30 s runs, as many pairs as fit
    python bench/gpu.py --rounds 5 --steps 300        # a fixed number of steps
    .venv/bin/python bench/gpu.py --cpu-harness --batch 32 --steps 10 --warmup 3 --pip-package scikit-learn
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from gpu_probe import GpuReading, SmiSampler, gpu_names, missing_gpu, recorded_gpus, side_by_side
from paired import MIN_ROUNDS, at_least, load, report, rotated

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
SCRIPT = "gpu_train.py"
FIRST = "tftrain-gpu-bench first line python="
NO_GPU = "TensorFlow sees no GPU in this environment"
BARE, TFTRAIN_RUN = "python train.py", "tftrain run"
CALIBRATION_STEPS = 50
BUILD_LIMIT = 1500  # seconds: the first run pip-installs tensorflow[and-cuda] (~3 GB) where it is cold
RUN_LIMIT = 600
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - STARTED:4.0f}s] {message}", flush=True)


class Outcome(NamedTuple):
    wall: float
    first_line: float  # seconds from launch to the script's first line
    images_per_s: float
    python: str  # the interpreter the script ran in
    run_dir: Path | None  # tftrain's run
    sampled: dict[int, GpuReading]  # nvidia-smi's, during the run
    log: Path  # its output


class Bench:
    def __init__(self, root: Path, args: argparse.Namespace) -> None:
        self.root, self.args = root, args
        self.gpu = not args.cpu_harness
        self.env = {**os.environ, "TFTRAIN_HOME": str(root / "home"), "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
        self.env.pop("GITHUB_ACTIONS", None)
        self.python = ""  # the environment's, once tftrain has built it
        self.count = 0
        (root / "src").mkdir()
        (root / "logs").mkdir()
        shutil.copy(HERE / "workloads" / SCRIPT, root / "src" / SCRIPT)

    def params(self, steps: int) -> list[str]:
        params = ["--steps", str(steps), "--warmup", str(self.args.warmup), "--batch", str(self.args.batch)]
        return params + (["--require-gpu"] if self.gpu else [])

    def manifest(self, steps: int) -> Path:
        path = self.root / "tftrain.yml"
        params = self.params(steps)
        pairs = "".join(f"  {flag}: {value}\n" for flag, value in zip(params[::2], params[1::2]))
        path.write_text(
            f"name: gpu-bench\nsource_directory: src\nentry_script: {SCRIPT}\n"
            f'framework_version: "{self.args.framework_version}"\nuse_gpu: {str(self.gpu).lower()}\n'
            + (f"pip_packages: {self.args.pip_package}\n" if self.args.pip_package else "")
            + f"script_params:\n{pairs}"
            + ("  --require-gpu: true\n" if self.gpu else "")
        )
        return path

    def tftrain(self, steps: int, limit: float = RUN_LIMIT) -> Outcome:
        return self.launch(TFTRAIN_RUN, [TFTRAIN, "run", "-f", str(self.manifest(steps))], self.root, limit)

    def bare(self, steps: int) -> Outcome:
        scratch = Path(tempfile.mkdtemp(dir=self.root, prefix="bare-"))
        shutil.copy(self.root / "src" / SCRIPT, scratch / SCRIPT)
        try:
            return self.launch(BARE, [self.python, SCRIPT, *self.params(steps)], scratch, RUN_LIMIT)
        finally:
            shutil.rmtree(scratch)

    def launch(self, name: str, argv: list[str], cwd: Path, limit: float) -> Outcome:
        """Runs argv to its end, nvidia-smi sampling beside it on a GPU; the times of its lines."""
        self.count += 1
        log = self.root / "logs" / f"{self.count:02d}-{name.split()[0]}.log"
        sampler = SmiSampler(self.root / "logs" / f"{self.count:02d}-nvidia-smi.csv") if self.gpu else None
        if sampler is not None:
            sampler.__enter__()
        first = None
        lines: list[str] = []
        started = time.perf_counter()
        try:
            with subprocess.Popen(
                argv, cwd=cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ) as proc:
                watchdog = threading.Timer(limit, proc.kill)
                watchdog.start()
                try:
                    for line in proc.stdout:
                        if first is None and FIRST in line:
                            first = time.perf_counter() - started
                        lines.append(line)
                    code = proc.wait()
                finally:
                    watchdog.cancel()
            wall = time.perf_counter() - started
        finally:
            if sampler is not None:
                sampler.__exit__(None, None, None)
        log.write_text("".join(lines))
        text = "".join(lines)
        if NO_GPU in text:
            raise SystemExit(f"no GPU: {NO_GPU} ({self.python or 'the environment tftrain built'}); nothing measured")
        rate = re.search(r"^images/s: ([0-9.]+)$", text, re.MULTILINE)
        if code != 0 or first is None or rate is None:
            tail = "".join(lines[-15:])
            raise SystemExit(f"{' '.join(argv)}: exit {code} after {wall:.0f}s (log {log}):\n{tail}")
        run = re.search(r"^run \S+ \(queued\)\s+→\s+(\S+)$", text, re.MULTILINE | re.IGNORECASE)
        if name == TFTRAIN_RUN and run is None:
            raise SystemExit(f"{' '.join(argv)}: no run directory in its first lines (log {log})")
        python = re.search(f"{re.escape(FIRST)}(.+)$", text, re.MULTILINE)
        return Outcome(
            wall,
            first,
            float(rate[1]),
            python[1].strip() if python else "",
            Path(run[1]) if run else None,
            sampler.readings() if sampler is not None else {},
            log,
        )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=at_least, default=MIN_ROUNDS, help=f"pairs timed (at least {MIN_ROUNDS})")
    parser.add_argument("--steps", type=int, help="steps each run times (default: as many as --seconds takes)")
    parser.add_argument("--seconds", type=float, default=30.0, help="a run's training, when --steps is not given")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps before the timed ones")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--framework-version", default="2.18", help="the manifest's (its tested set)")
    parser.add_argument("--budget-seconds", type=float, help="stop after the rounds that fit in this (from start)")
    parser.add_argument(
        "--pip-package", action="append", default=[], help="the manifest's pip_packages (a cached environment's)"
    )
    parser.add_argument("--cpu-harness", action="store_true", help="use_gpu: false, tensorflow-cpu: checks the harness")
    return parser.parse_args()


def preflight(args: argparse.Namespace) -> None:
    if args.cpu_harness:
        say("CPU HARNESS CHECK: use_gpu: false, tensorflow-cpu; these are not GPU figures")
        return
    reason = missing_gpu()
    if reason is not None:
        raise SystemExit(f"no GPU: {reason}; nothing measured (--cpu-harness checks the harness without one)")
    try:
        import pynvml  # noqa: F401  (tftrain's usage sampler needs it: the `gpu` extra)
    except ImportError:
        raise SystemExit(
            f"{sys.executable} lacks nvidia-ml-py: tftrain would record no GPU usage; install tftrain with"
            " its gpu extra (pip install '.[gpu]')"
        ) from None
    from importlib import metadata

    try:  # tftrain trains in its own interpreter where the release is there, CPU build or not
        found = metadata.version("tensorflow-cpu")
    except metadata.PackageNotFoundError:
        found = None
    if found is not None:
        raise SystemExit(
            f"{sys.executable} has tensorflow-cpu {found}: tftrain would train in it, on the CPU, instead of"
            " building the curated tensorflow[and-cuda] environment; run this with a tftrain venv without it"
        )
    say(f"GPUs: {'; '.join(gpu_names())}")


def calibration_steps(args: argparse.Namespace) -> int:
    return min(CALIBRATION_STEPS, args.steps or CALIBRATION_STEPS)


def planned_steps(args: argparse.Namespace, calibration: Outcome, warm_bare: Outcome) -> int:
    """--steps, else as many as --seconds of training takes at the warm-up's rate, shortened so that
    --rounds pairs fit in what is left of --budget-seconds."""
    if args.steps:
        return args.steps
    seconds = args.seconds
    setup = max(warm_bare.wall - calibration_steps(args) * args.batch / warm_bare.images_per_s, 0.0)
    if args.budget_seconds:
        left = args.budget_seconds - (time.monotonic() - STARTED)
        seconds = min(seconds, 0.85 * left / (2 * args.rounds) - setup)
        if seconds < 5:
            say(f"the budget leaves {left:.0f}s: runs of 5 s of training; not every round may fit")
            seconds = 5.0
    rate = statistics.fmean([calibration.images_per_s, warm_bare.images_per_s])
    return max(int(seconds * rate / args.batch), 10)


def main() -> int:
    args = arguments()
    say(f"load {load()}; {os.cpu_count()} CPUs")
    preflight(args)
    with tempfile.TemporaryDirectory(prefix="tftrain-gpu-bench-") as tmp:
        bench = Bench(Path(tmp), args)
        say("unmeasured tftrain run: builds (or reuses) the environment, calibrates the steps")
        calibration = bench.tftrain(calibration_steps(args), BUILD_LIMIT)
        bench.python = calibration.python
        environment = next(
            (line for line in calibration.log.read_text().splitlines() if line.startswith("environment:")),
            "environment: (not printed)",
        )
        say(f"{environment.strip()}; took {calibration.wall:.0f}s; python {bench.python}")
        warm_bare = bench.bare(calibration_steps(args))
        steps = planned_steps(args, calibration, warm_bare)
        say(
            f"warm: {calibration.images_per_s:.0f} images/s under tftrain, {warm_bare.images_per_s:.0f} bare;"
            f" {steps} steps of {args.batch} a run"
        )
        outcomes: dict[str, list[Outcome]] = {BARE: [], TFTRAIN_RUN: []}
        variants = {BARE: lambda: bench.bare(steps), TFTRAIN_RUN: lambda: bench.tftrain(steps)}
        longest = 0.0
        for number in range(args.rounds):
            elapsed = time.monotonic() - STARTED
            estimate = longest or 2.2 * (
                warm_bare.wall + (steps - calibration_steps(args)) * args.batch / warm_bare.images_per_s
            )
            if args.budget_seconds and elapsed + estimate > args.budget_seconds:
                say(f"budget: {number} of {args.rounds} rounds done; the next (~{estimate:.0f}s) would not fit")
                break
            began = time.monotonic()
            for name in rotated(list(variants), number):
                outcomes[name].append(variants[name]())
            longest = max(longest, time.monotonic() - began)
            bare, run = outcomes[BARE][-1], outcomes[TFTRAIN_RUN][-1]
            say(
                f"round {number + 1}/{args.rounds}: images/s bare {bare.images_per_s:.0f}, tftrain"
                f" {run.images_per_s:.0f} (ratio {run.images_per_s / bare.images_per_s:.3f}); first line bare"
                f" {bare.first_line:.2f}s, tftrain {run.first_line:.2f}s; wall {bare.wall:.1f}s / {run.wall:.1f}s"
                f" (load {load()})"
            )
            if bench.gpu:
                print(f"    {side_by_side(recorded_gpus(run.run_dir), run.sampled)}", flush=True)
    return 0 if summary(args, outcomes) else 1


def summary(args: argparse.Namespace, outcomes: dict[str, list[Outcome]]) -> int:
    """Prints the figures; the number of pairs measured."""
    done = len(outcomes[BARE])
    label = "CPU HARNESS CHECK (use_gpu: false, tensorflow-cpu; not a GPU figure)" if args.cpu_harness else "GPU"
    print(f"--- {label}: {done} pairs of {args.rounds} planned; load {load()}")
    if not done:
        print("no round fitted: nothing measured")
        return 0
    if done < MIN_ROUNDS:
        print(f"fewer than {MIN_ROUNDS} pairs: the medians below are no figure worth reading")
    bare, runs = outcomes[BARE], outcomes[TFTRAIN_RUN]
    ratio = statistics.median(r.images_per_s / b.images_per_s for r, b in zip(runs, bare))
    print(
        f"images/s: median bare {statistics.median(b.images_per_s for b in bare):.1f}, tftrain"
        f" {statistics.median(r.images_per_s for r in runs):.1f}; paired ratio tftrain/bare {ratio:.3f} (goal ≥ 0.98)"
    )
    added = statistics.median(r.first_line - b.first_line for r, b in zip(runs, bare))
    print(
        f"first line: median bare {statistics.median(b.first_line for b in bare):.3f}s, tftrain"
        f" {statistics.median(r.first_line for r in runs):.3f}s after launch; paired added {added:+.3f}s"
    )
    report({BARE: [b.wall for b in bare], TFTRAIN_RUN: [r.wall for r in runs]}, reference=BARE)
    if args.cpu_harness:
        return done
    recorded = [recorded_gpus(r.run_dir) for r in runs]
    for index in sorted({i for found in recorded for i in found} | {i for r in runs for i in r.sampled}):
        ours = [found[index].utilization_mean for found in recorded if index in found]
        smi = [r.sampled[index].utilization_mean for r in runs if index in r.sampled]
        print(
            f"gpu{index} utilisation, median over the tftrain runs: tftrain (run.json, NVML every 5 s)"
            f" {statistics.median(ours):.1f}% ({len(ours)} runs) | nvidia-smi (-lms 500, the same runs)"
            f" {statistics.median(smi):.1f}% ({len(smi)} runs)"
            if ours and smi
            else f"gpu{index}: tftrain recorded {len(ours)} runs, nvidia-smi {len(smi)}: no pair to compare"
        )
    return done


if __name__ == "__main__":
    sys.exit(main())
