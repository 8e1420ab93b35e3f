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
    open("outputs/model/step", "w").write(str(step))  # the checkpoint, inside model.path
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


def sweep_manifest(project, steps=6, pause=0.05, sampling="{type: random, seed: 3}", metric="score", trials=4, concurrent=2, extra="", script=SCRIPT):
    text = MANIFEST.format(steps=steps, pause=pause, sampling=sampling, metric=metric, trials=trials, concurrent=concurrent, extra=extra)
    return project(script=script, manifest=text)


def show(cli, ref="latest") -> dict:
    result = cli("sweeps", "show", ref, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def show_in(home) -> dict:
    result = subprocess.run([TFTRAIN, "sweeps", "show", "latest", "--json"], env={**os.environ, "TFTRAIN_HOME": str(home)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_more_concurrent_trials_than_the_machine_can_place_is_refused_before_any_runs(project, cli, home):
    path = sweep_manifest(project, concurrent=3)
    path.write_text(path.read_text() + "compute:\n  slots_per_node: 2\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 7
    assert "sweep.limits.max_concurrent_trials: 3 trials of 1 process need 3 slots; compute.slots_per_node is 2" in result.stderr
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


def test_warm_start_gives_the_new_study_the_earlier_trials_but_not_its_table(project, cli, home):
    path = sweep_manifest(project, trials=2)
    assert cli("run", "-f", str(path)).returncode == 0
    earlier = show(cli, "demo-sweep-1")["trials"]
    path.write_text(path.read_text() + "  warm_start: [demo-sweep-1]\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    document = show(cli, "demo-sweep-2")
    assert [t["number"] for t in document["trials"]] == [2, 3]  # numbers 0 and 1 are the earlier sweep's, known to the sampler
    import optuna

    study = optuna.load_study(study_name="demo-sweep-2", storage=f"sqlite:///{home / 'sweeps.db'}")
    warm = [t for t in study.trials if "warm_start_from" in t.user_attrs]
    assert sorted((t.user_attrs["values"]["--lr"], t.value) for t in warm) == sorted((t["params"]["--lr"], t["value"]) for t in earlier)
    assert document["best"]["run_id"] in {t["run_id"] for t in document["trials"]}  # never an earlier sweep's trial


def test_in_actions_each_trial_is_a_group_and_the_table_is_the_job_summary(project, home, tmp_path):
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs), "COLUMNS": "200"}
    result = subprocess.run([TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("::group::trial ") == 2 and "::endgroup::" in result.stdout
    text = summary.read_text()
    assert "## Sweep demo-sweep-1: Completed" in text and "| trial | run | status | score | params |" in text
    assert "```mermaid" in text and "xychart-beta" in text
    assert "sweep-id<<" in outputs.read_text() and "model-version<<" in outputs.read_text()


def test_the_pull_request_comment_shows_the_trials_of_the_best_trials_sweep(project, home, tmp_path, github_api):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 7, "pull_request": {"number": 7, "labels": [], "head": {"ref": "f", "repo": {"full_name": "octo/models"}}}}))
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
           "GITHUB_REPOSITORY": "octo/models", "GITHUB_API_URL": github_api.url, "INPUT_GITHUB_TOKEN": "ghs_test",
           "GITHUB_OUTPUT": str(tmp_path / "outputs.txt")}
    run = subprocess.run([TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    best = show(lambda *args: subprocess.run([TFTRAIN, *args], capture_output=True, text=True))["best"]
    comment = subprocess.run([TFTRAIN, "github", "comment", "--run", best["run_id"]], env=env, capture_output=True, text=True, timeout=120)
    assert comment.returncode == 0, comment.stderr
    (posted,) = github_api.comments.values()
    assert "## Sweep demo-sweep-1: Completed" in posted["body"] and f"Best: trial {best['number']}" in posted["body"]
    assert f"{best['run_id']}: Completed" in posted["body"]  # the best run's own summary follows


def test_publishing_the_best_trial_adds_the_sweeps_plot(project, home, github_api):
    env = {**os.environ, "GITHUB_REPOSITORY": "octo/models", "GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghs_test"}
    assert subprocess.run([TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))], env=env, capture_output=True, timeout=300).returncode == 0
    best = show(lambda *args: subprocess.run([TFTRAIN, *args], capture_output=True, text=True))["best"]
    published = subprocess.run([TFTRAIN, "publish", "--run", best["run_id"]], env=env, capture_output=True, text=True, timeout=300)
    assert published.returncode == 0, published.stderr
    (release,) = github_api.releases
    names = {asset["name"] for asset in release["assets"]}
    assert "sweep-trials.png" in names and "model.tar.gz" in names
    png = next(a for a in release["assets"] if a["name"] == "sweep-trials.png")
    assert github_api.assets[png["id"]][1][:8] == b"\x89PNG\r\n\x1a\n"
