"""What the slurm target adds, on the real two-node cluster of scripts/slurm-up:

1. seconds from the command to the first line of rank 0 of a 2-node job (two tasks, one a node):
   `tftrain run` (target: slurm, multi-worker TF_CONFIG built in the allocation) against the same
   tasks submitted by hand (`sbatch` of a script whose `srun` prints), alternating, medians of
   --rounds; goal: tftrain adds <= 1 s;
2. the scheduling overhead per sweep trial: a 4-trial sweep (2 at once) of a short script on the
   slurm target against the same sweep on the local target, per trial;
3. (--array, alone) what a sweep's array job adds per trial: the same two batch scripts handed to
   the sweep's batcher (runner.targets.slurm.array_jobs: one `sbatch --array=0-1%2`) against a bare
   `sbatch` of each, interleaved --rounds pairs (at least 5), seconds from the submission to each
   task's first line, medians, paired ratio and difference; goal: <= 0.3 s per trial.

    SLURM_CONF=/tmp/tftrain-slurm/slurm.conf .venv/bin/python bench/slurm.py [--rounds 3] [--array]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from paired import at_least, load, report

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
FIRST = "import os, time\nprint('first', repr(time.time()), os.environ.get('SLURMD_NODENAME'), flush=True)\n"
GOAL_SECONDS = 1.0
JOB = """name: {name}
source_directory: src
entry_script: train.py
user_managed: true
model: {{gate: "off", register: false}}
node_count: 2
distributed_training: {{backend: multi_worker_mirrored, worker_count: 2}}
compute: {{target: {target}}}
"""
SWEEP = """name: {name}
source_directory: src
entry_script: train.py
user_managed: true
model: {{gate: "off", register: false}}
compute: {{target: {target}}}
metrics: {{regex: {{score: 'score: ([0-9.]+)'}}}}
sweep:
  sampling_algorithm: grid
  search_space: {{--x: {{type: choice, values: [1, 2, 3, 4]}}}}
  objective: {{primary_metric: score, goal: maximize}}
  limits: {{max_total_trials: 4, max_concurrent_trials: 2}}
"""
TRIAL = "import sys, time\ntime.sleep(1)\nprint('score:', sys.argv[-1], flush=True)\n"


def project(root: Path, name: str, manifest: str, script: str) -> Path:
    (root / name / "src").mkdir(parents=True, exist_ok=True)
    (root / name / "src" / "train.py").write_text(script)
    (root / name / "tftrain.yml").write_text(manifest)
    return root / name / "tftrain.yml"


def first_line(where: Path, pattern: str, timeout: float = 120) -> float:
    """The time rank 0 printed first, in the one file `pattern` finds under `where` (run ids are
    numbered across names)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        paths = list(where.glob(pattern))
        found = re.search(r"^first ([0-9.]+)", paths[0].read_text() if paths else "", re.M)
        if found:
            return float(found[1])
        time.sleep(0.01)
    raise SystemExit(f"no first line in {where}/{pattern}")


def by_hand(root: Path, round_: int) -> float:
    out = root / f"hand-{round_}"
    out.mkdir()
    (out / "train.py").write_text(FIRST)
    script = out / "job.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --output={out}/batch.log\n"
        f"srun --output={out}/rank-%t.log {sys.executable} {out}/train.py\n"
    )
    started = time.time()
    subprocess.run(["sbatch", "--parsable", str(script)], check=True, capture_output=True)
    seconds = first_line(out, "rank-0.log") - started
    _wait_empty()
    return seconds


def by_tftrain(root: Path, env: dict, round_: int) -> tuple[float, float, float]:
    """(seconds to rank 0's first line, of them before the run was recorded: the checks, the
    user_managed TensorFlow probe included, and from the record to sbatch's answer)."""
    path = project(root, f"job{round_}", JOB.format(name=f"job{round_}", target="slurm"), FIRST)
    started = time.time()
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    marks = {}
    for line in process.stdout:
        for mark, words in (("recorded", "(queued)"), ("submitted", " submitted: ")):
            if words in line and mark not in marks:
                marks[mark] = time.time() - started
    if process.wait(timeout=300) != 0 or len(marks) < 2:
        raise SystemExit(f"tftrain run of {path} failed")
    seconds = first_line(Path(env["TFTRAIN_HOME"]) / "runs", f"job{round_}-*/workdir/logs/0.log") - started
    return seconds, marks["recorded"], marks["submitted"] - marks["recorded"]


def _wait_empty() -> None:
    while subprocess.run(["squeue", "-h", "--me"], capture_output=True, text=True).stdout.strip():
        time.sleep(0.1)


def sweep(root: Path, env: dict, target: str) -> float:
    path = project(root, f"sweep-{target}", SWEEP.format(name=f"sweep-{target}", target=target), TRIAL)
    started = time.perf_counter()
    done = subprocess.run([TFTRAIN, "run", "-f", str(path)], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"sweep on {target} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


ARRAY_TRIALS = 2
ARRAY_GOAL_SECONDS = 0.3
TRIAL_SCRIPT = (
    "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks=1\n#SBATCH --comment=tftrain-bench\n{output}"
    "echo first $(date +%s.%N)\n"
)


def trial_scripts(root: Path, tag: str, bare: bool) -> list[Path]:
    """ARRAY_TRIALS batch scripts of one round, each in its own launch directory (a trial's)."""
    scripts = []
    for number in range(ARRAY_TRIALS):
        launch = root / f"{tag}-{number}" / "launch"
        launch.mkdir(parents=True)
        output = f"#SBATCH --job-name=tftrain-bench\n#SBATCH --output={launch}/batch.log\n" if bare else ""
        (launch / "slurm.sh").write_text(TRIAL_SCRIPT.format(output=output))
        scripts.append(launch / "slurm.sh")
    return scripts


def first_lines(scripts: list[Path], started: float) -> float:
    """The mean seconds from `started` to each task's first line (its batch.log), once all printed."""
    return statistics.mean(first_line(script.parent, "batch.log") - started for script in scripts)


def bare_sbatch(root: Path, tag: str) -> float:
    scripts = trial_scripts(root, tag, bare=True)
    submit = [
        lambda script=script: subprocess.run(["sbatch", "--parsable", str(script)], check=True, capture_output=True)
        for script in scripts
    ]
    return _timed(scripts, submit)


def array_job(root: Path, tag: str) -> float:
    """The trials' scripts through the sweep's batcher, each from a thread of its own (a sweep's workers)."""
    from runner.targets.slurm.array_jobs import ArrayEntry, sbatch_options, sweep_batcher

    scripts = trial_scripts(root, tag, bare=False)
    batcher = sweep_batcher(root / f"{tag}-arrays", tag, ARRAY_TRIALS)
    tickets = [batcher.opened() for _ in scripts]
    entries = [
        ArrayEntry(
            script,
            script.parent,
            str(root),
            sbatch_options(script.read_text()),
            dict(os.environ),
            comment="tftrain-bench",
        )
        for script in scripts
    ]
    return _timed(
        scripts, [lambda ticket=ticket, entry=entry: ticket.submit(entry) for ticket, entry in zip(tickets, entries)]
    )


def _timed(scripts: list[Path], submissions) -> float:
    """Each submission from a thread of its own, at once: the mean seconds to each task's first line."""
    started = time.time()
    threads = [threading.Thread(target=submit) for submit in submissions]
    for thread in threads:
        thread.start()
    seconds = first_lines(scripts, started)
    for thread in threads:
        thread.join()
    return seconds


def array_overhead(root: Path, rounds: int) -> None:
    variants = {"sbatch": bare_sbatch, "array": array_job}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for number in range(rounds):
        for name in names[number % 2 :] + names[: number % 2]:
            seconds[name].append(variants[name](root, f"{name}{number}"))
            _wait_empty()  # untimed: the next submission finds the queue as this one did
        print(
            f"round {number + 1}/{rounds}: "
            + "  ".join(f"{n} {seconds[n][-1]:.3f}s" for n in names)
            + f"  (load {load()})"
        )
    print(f"{ARRAY_TRIALS} trials at once, seconds from the submission to each task's first line, mean per trial:")
    report(seconds, "sbatch")
    # Slurm starts jobs at its scheduler's passes: single rounds differ by whole seconds either way,
    # so the paired median can land on one such step; the medians' difference says it too
    added = statistics.median(a - b for a, b in zip(seconds["array"], seconds["sbatch"]))
    apart = statistics.median(seconds["array"]) - statistics.median(seconds["sbatch"])
    print(f"difference of the medians: {apart:+.3f} s per trial")
    verdict = "met" if added <= ARRAY_GOAL_SECONDS else "NOT met"
    print(f"array job per trial: {added:+.3f} s over a bare sbatch (goal <= {ARRAY_GOAL_SECONDS} s: {verdict})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--array", action="store_true", help="only the array job's overhead per trial (rounds >= 5)")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF") and not Path("/etc/slurm/slurm.conf").exists():
        raise SystemExit("set SLURM_CONF (scripts/slurm-up prints it)")
    if args.array:
        try:
            rounds = at_least(max(args.rounds, 5))
        except ValueError as exc:
            raise SystemExit(f"--rounds: {exc}") from None
        with tempfile.TemporaryDirectory(prefix="tftrain-slurm-array-bench-") as tmp:
            array_overhead(Path(tmp), rounds)
        return 0
    with tempfile.TemporaryDirectory(prefix="tftrain-slurm-bench-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "TFTRAIN_HOME": str(root / "home"), "PYTHONPATH": str(REPO)}
        hand, ours = [], []
        for round_ in range(args.rounds):
            hand.append(by_hand(root, round_))
            ours.append(by_tftrain(root, env, round_))
        h = statistics.median(hand)
        t, checks, submit = (statistics.median(item[i] for item in ours) for i in range(3))
        job = t - checks  # from the run's record on: what tftrain adds to the job itself
        print(
            f"first line of rank 0, 2-node job: by hand (sbatch) {h:.2f} s; tftrain {t:.2f} s in all, ratio"
            f" {t / h:.2f}, added {t - h:.2f} s"
        )
        print(
            f"  of tftrain's: {checks:.2f} s before the run is recorded (start-up, sbatch --test-only, the user_managed"
            f" TensorFlow import probe), {submit:.2f} s from the record to sbatch's answer, {t - checks - submit:.2f} s"
            " from there to the line"
        )
        print(
            f"  from the record on: {job:.2f} s, ratio {job / h:.2f}, added {job - h:.2f} s (goal <= {GOAL_SECONDS:g}"
            f" s: {'met' if job - h <= GOAL_SECONDS else 'NOT met'}; in all:"
            f" {'met' if t - h <= GOAL_SECONDS else 'NOT met'})"
        )
        local, slurm = sweep(root, env, "local"), sweep(root, env, "slurm")
        print(
            f"4-trial sweep, 2 at once: local {local:.1f} s, slurm {slurm:.1f} s; ratio {slurm / local:.2f}, "
            f"scheduling overhead per trial {(slurm - local) / 4:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
