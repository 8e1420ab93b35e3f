"""How much `tftrain run` adds to a training job, on the real path: the same fixed CPU-bound Keras
training, its model exported as a SavedModel, bare (`python train.py` in a scratch copy) and under
`tftrain run` (the model gated, `gate: required`, and registered), interleaved with the order
rotating, at least 5 pairs; medians of the paired ratios and differences, the load beside them.
One unmeasured pair first builds the run's environment. Everything is written under a temporary
directory (the run's home, the bare run's copy), never into this tree. Goal: ≤ 1.02 on a ~60 s job
and ≤ 1 s added (the gate's load of the model included).

    .venv/bin/python bench/overhead.py             # ~60 s job, 5 rounds (about 12 minutes)
    .venv/bin/python bench/overhead.py --quick     # ~8 s job, 5 rounds
    .venv/bin/python bench/overhead.py --quick --evaluation   # the same under `evaluation:` (seeds: 1): the
                                                   # seeds' driver, the gate after the run, the evidence kept
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from paired import MIN_ROUNDS, at_least, interleaved, load, report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
NAME = "overhead"


def run(argv: list[str], env: dict, cwd: Path) -> None:
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr[-2000:]}")


def bare(root: Path, epochs: str, env: dict, extra: tuple[str, ...] = ()) -> None:
    """`python train.py` in a fresh copy of the source, exporting its model as the run does."""
    scratch = Path(tempfile.mkdtemp(dir=root, prefix="bare-"))
    shutil.copy(root / "src" / "cpu_train.py", scratch / "cpu_train.py")
    run([sys.executable, "cpu_train.py", "--epochs", epochs, "--model-dir", "outputs/model", *extra], env, scratch)
    shutil.rmtree(scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=at_least, default=MIN_ROUNDS, help=f"pairs timed (at least {MIN_ROUNDS})")
    parser.add_argument("--quick", action="store_true", help="a ~8 s job instead of ~60 s")
    parser.add_argument(
        "--evaluation",
        action="store_true",
        help="tftrain run with evaluation: (one seed), the per-example file written by both",
    )
    args = parser.parse_args()
    epochs = "12" if args.quick else "165"
    with tempfile.TemporaryDirectory(prefix="tftrain-overhead-bench-") as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        shutil.copy(HERE / "workloads" / "cpu_train.py", root / "src" / "cpu_train.py")
        manifest = root / "tftrain.yml"
        extra = ("--per-example", "outputs/eval.jsonl") if args.evaluation else ()
        manifest.write_text(
            f"name: {NAME}\nsource_directory: src\nentry_script: cpu_train.py\n"
            f"script_params:\n  --epochs: {epochs}\n  --model-dir: outputs/model\n"
            + (
                "  --per-example: outputs/eval.jsonl\nevaluation: {per_example: outputs/eval.jsonl, metric: correct}\n"
                if args.evaluation
                else ""
            )
            + "model: {path: outputs/model, gate: required}\n"
        )
        env = {**os.environ, "TFTRAIN_HOME": str(root / "home"), "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
        env.pop("GITHUB_ACTIONS", None)
        variants = {
            "python train.py": lambda: bare(root, epochs, env, extra),
            "tftrain run": lambda: run([TFTRAIN, "run", "-f", str(manifest)], env, root),
        }
        print(f"load before: {load()}", flush=True)
        for variant in variants.values():  # the environment built, the caches warm: not timed
            variant()
        seconds = interleaved(variants, args.rounds)
        versions = sorted((root / "home" / "models" / NAME).glob("v*/version.json"))
        gated = [json.loads(path.read_text()).get("serving") for path in versions]
        if len(versions) != args.rounds + 1 or not all(gated):
            raise SystemExit(
                f"expected {args.rounds + 1} gated, registered versions; found {len(versions)} ({sum(map(bool, gated))}"
                " gated)"
            )
    print(f"load after: {load()}; every tftrain run gated and registered its model ({len(versions)} versions)")
    report(seconds, reference="python train.py")
    print("goal: ratio ≤ 1.02 on the ~60 s job, added ≤ 1 s")


if __name__ == "__main__":
    main()
