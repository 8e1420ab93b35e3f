"""Sweeps in tests: a script whose score follows its flags, a manifest sweeping them, the sweep's JSON."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import TFTRAIN

# Each step prints the metric; the value grows with --lr and falls with --bs, so trials differ.
SCRIPT = """\
import argparse, os, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--bs", type=int, default=32)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--pause", type=float, default=0.05)
parser.add_argument("--slow-below", type=float, default=0.0)  # a trial with a smaller --lr takes 3x as long a step
args = parser.parse_args()
start = 1
resume = os.environ.get("TFTRAIN_RESUME_FROM")  # a copy of an earlier run's model.path (tftrain sweep resume)
if resume and os.path.exists(os.path.join(resume, "step")):
    start = int(open(os.path.join(resume, "step")).read()) + 1
    print(f"resumed at step {start}", flush=True)
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/pid", "w").write(str(os.getpid()))
for step in range(start, args.steps + 1):
    score = args.lr * 10 - args.bs / 1000 + step / 100
    print(f"step {step} score: {score:.5f}", flush=True)
    partial = f"outputs/model/step.{os.getpid()}"  # the checkpoint, inside model.path: whole or not (a trial killed
    open(partial, "w").write(str(step))  # mid-write left it empty, and its resume failed); one temporary file per
    os.replace(partial, "outputs/model/step")  # process: an MPI trial's two ranks share the directory
    time.sleep(args.pause * (3 if args.lr < args.slow_below else 1))
open("outputs/model/weights.txt", "w").write(f"lr={args.lr} bs={args.bs}")
"""

MANIFEST = """\
script_params:
  --steps: {steps}
  --pause: {pause}
metrics:
  regex:
    score: 'score: ([0-9.-]+)'
sweep:
  sampling_algorithm: {sampling}
  search_space:
    --lr: {{type: choice, values: [0.01, 0.05, 0.1, 0.2]}}
    --bs: {{type: choice, values: [16, 64]}}
  objective: {{primary_metric: {metric}, goal: maximize}}
  limits: {{max_total_trials: {trials}, max_concurrent_trials: {concurrent}}}
{extra}"""


def sweep_manifest(
    project,
    steps=6,
    pause=0.05,
    sampling="{type: random, seed: 3}",
    metric="score",
    trials=4,
    concurrent=2,
    extra="",
    script=SCRIPT,
):
    text = MANIFEST.format(
        steps=steps, pause=pause, sampling=sampling, metric=metric, trials=trials, concurrent=concurrent, extra=extra
    )
    return project(script=script, manifest=text)


def show(cli, ref="latest") -> dict:
    result = cli("sweeps", "show", ref, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def show_in(home) -> dict:
    result = subprocess.run(
        [TFTRAIN, "sweeps", "show", "latest", "--json"],
        env={**os.environ, "TFTRAIN_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
