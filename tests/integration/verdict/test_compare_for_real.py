"""`tftrain compare` on real runs: a baseline that kept no evidence (a version made before
`evaluation:`) re-evaluated by the evaluation script under the candidate run's real interpreter, in
its working directory; a script that fails or runs too long is an inconclusive verdict naming it;
a release's evidence travels through GitHub Releases (a server speaking GitHub's REST protocol) and
back, and a version signed over its whole directory, evidence included, publishes and verifies."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from builders import Notes
from conftest import TFTRAIN
from verdicts import keep_evidence

from runner.verdict.evidence import read_evidence

pytestmark = pytest.mark.integration

EXAMPLES = 400
# the model's "quality" is written into it; scoring is deterministic per (quality, example)
SCORE = """\
import hashlib
def scored(quality, index):
    draw = int(hashlib.sha256((str(quality) + ":" + str(index)).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 1 if draw < quality else 0
"""
TRAIN = (
    SCORE
    + """\
import json, os
quality = float(os.environ.get("QUALITY", "0.8"))
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/saved_model.pb", "w").write(str(quality))
with open("outputs/eval.jsonl", "w") as out:
    for index in range({examples}):
        out.write(json.dumps({{"id": f"e{{index}}", "correct": scored(quality + 0.001 * int(os.environ.get("SEED", "0")), index)}}) + "\\n")
print(f"accuracy={{quality}}", flush=True)
"""
)
EVALUATE = (
    SCORE
    + """\
import argparse, json, os, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--out")
args = parser.parse_args()
open("seen.json", "w").write(json.dumps({{"seed": os.environ.get("TFTRAIN_SEED"), "python": sys.executable, "cwd": os.getcwd()}}))
if os.environ.get("EVALUATE_FAILS"):
    print("the evaluation fell over", flush=True)
    sys.exit(3)
if os.environ.get("EVALUATE_HANGS"):
    time.sleep(600)
quality = float(open(os.path.join(args.model, "saved_model.pb")).read())
with open(args.out, "w") as out:
    for index in range({examples}):
        out.write(json.dumps({{"id": f"e{{index}}", "correct": scored(quality, index)}}) + "\\n")
"""
)
MANIFEST = """\
model: {gate: "off"}
metrics: {regex: {accuracy: 'accuracy=([0-9.]+)'}, primary: accuracy}
"""
RULES = "evaluation: {per_example: outputs/eval.jsonl, metric: correct, script: evaluate.py}\n"


def tftrain(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TFTRAIN, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=600,
    )


@pytest.fixture
def runs(project, home):
    """demo-1 (quality 0.80, registered demo@v1, no evidence) and demo-2 (quality 0.95, 3 seeds of evidence kept
    as the seeds driver keeps them); `rules`: a manifest whose evaluation: names the script."""
    manifest = project(script=TRAIN.format(examples=EXAMPLES), manifest=MANIFEST)
    (manifest.parent / "src" / "evaluate.py").write_text(EVALUATE.format(examples=EXAMPLES))
    assert tftrain("run", "-f", str(manifest), env={"QUALITY": "0.80"}).returncode == 0
    seeds = []
    for seed in range(3):
        result = tftrain("run", "-f", str(manifest), env={"QUALITY": "0.95", "SEED": str(seed)})
        assert result.returncode == 0, result.stderr
        seeds.append(
            read_evidence(home / "runs" / f"demo-{seed + 2}" / "workdir" / "outputs" / "eval.jsonl", "correct").by_id()
        )
    keep_evidence(home / "runs" / "demo-2", seeds)
    rules = manifest.parent / "rules.yml"
    rules.write_text(manifest.read_text() + RULES)
    return home, rules


def test_a_baseline_without_evidence_is_re_evaluated_on_the_candidates_set_in_its_environment(runs):
    home, rules = runs
    result = tftrain(
        "compare", "demo-2", "demo@v1", "-f", str(rules), "--fail-on-regression", env={"TFTRAIN_SEED": "7"}
    )
    assert result.returncode == 0, result.stderr
    notice, line = result.stdout.splitlines()[:2]
    assert notice.startswith("re-evaluating demo@v1 on this run's evaluation set: evaluate.py (log: ")
    assert (
        line.startswith("correct 0.9")
        and "(3 seeds) vs demo@v1 0.8" in line
        and "(1 seed)" in line
        and line.endswith("→ better")
    ), line
    assert (
        "demo@v1 re-evaluated on this run's set by evaluate.py (demo@v1 kept no per-example evidence)" in result.stdout
    )
    assert "one seed on the baseline: its seed variance is the candidate's" in result.stdout

    run_dir = home / "runs" / "demo-2"
    seen = json.loads((run_dir / "workdir" / "seen.json").read_text())
    lock = json.loads(json.dumps(__import__("yaml").safe_load((run_dir / "manifest.lock.yml").read_text())))
    assert seen == {"seed": None, "python": lock["environment"]["python"], "cwd": str(run_dir / "workdir")}
    kept = read_evidence(run_dir / "evaluation" / "baseline-demo-v1.jsonl", "correct")
    assert len(kept.ids) == EXAMPLES and 0.7 < kept.values.mean() < 0.9
    assert (run_dir / "evaluation" / "baseline-eval.log").is_file()
    assert sorted(p.name for p in (run_dir / "evaluation").iterdir()) == [
        "baseline-demo-v1.jsonl",
        "baseline-eval.log",
        "evaluation.json",
        "seed-0.jsonl",
        "seed-1.jsonl",
        "seed-2.jsonl",
    ]

    result = tftrain(
        "compare", "demo@v1", "demo-2", "-f", str(rules), "--fail-on-regression"
    )  # v1 kept none: it cannot be the candidate
    assert result.returncode == 32 and "the candidate demo@v1 kept no per-example evidence" in result.stderr


@pytest.mark.parametrize(
    "failure, words",
    [
        ("EVALUATE_FAILS", "evaluate.py exited with status 3 re-evaluating it (log: {log})"),
        ("NO_SCRIPT", "no evaluation.script to score it on this run's set"),
    ],
)
def test_a_failing_script_or_none_leaves_the_verdict_inconclusive_in_one_named_line(runs, failure, words):
    home, rules = runs
    if failure == "NO_SCRIPT":
        rules.write_text(rules.read_text().replace(", script: evaluate.py", ""))
    result = tftrain("compare", "demo-2", "demo@v1", "-f", str(rules), "--json", env={failure: "1"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    log = home / "runs" / "demo-2" / "evaluation" / "baseline-eval.log"
    assert data["verdict"] == "inconclusive" and words.format(log=log) in data["reason"]
    assert data["point"] == {"metric": "accuracy", "candidate": 0.95, "baseline": 0.8}
    if failure == "EVALUATE_FAILS":
        assert "the evaluation fell over" in log.read_text()
        assert not (home / "runs" / "demo-2" / "evaluation" / "baseline-demo-v1.jsonl").exists()


def test_a_script_past_its_time_is_killed_and_named(runs, monkeypatch):
    from runner.manifest import load_manifest
    from runner.verdict import reevaluate
    from runner.verdict.refs import side_of

    home, rules = runs
    monkeypatch.setattr(reevaluate, "REEVALUATION_TIMEOUT_SECONDS", 3)
    monkeypatch.setenv("EVALUATE_HANGS", "1")
    spec = load_manifest(rules).manifest.evaluation
    with side_of("demo@v1", home, Notes(), metric="correct") as baseline:
        judgement = reevaluate.verdict_against(home / "runs" / "demo-2", "demo-2", baseline, spec, Notes())
    assert judgement.verdict.value == "inconclusive" and judgement.comparison is None
    assert "evaluate.py did not finish in 0 min re-evaluating it (log: " in judgement.reason


def test_a_released_versions_evidence_comes_back_verified_and_a_pre_evidence_release_is_re_evaluated(
    runs, github_api, tmp_path
):
    home, rules = runs
    env = {"GITHUB_REPOSITORY": "octo/models", "GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghs_test"}
    # demo@v1 kept no evidence: a release from before
    assert tftrain("publish", "--run", "demo-1", env=env).returncode == 0
    result = tftrain("compare", "demo-2", "release:demo@v1", "-f", str(rules), "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "better" and data["seeds"] == {"candidate": 3, "baseline": 1}
    assert "release demo-v1 kept no per-example evidence" in data["method"]

    # demo-2 registered as demo@v2 with its evidence, published: the release carries it, and a compare reads it back
    from runner.history.registration import register_finished
    from runner.verdict.layout import DIRECTORY

    kept = home / "runs" / "demo-2" / DIRECTORY
    extras = {
        f"{DIRECTORY}/{name}": kept / name
        for name in ("evaluation.json", "seed-0.jsonl", "seed-1.jsonl", "seed-2.jsonl")
    }
    assert register_finished(home, "demo-2", {}, extras=extras) == "demo@v5"
    result = tftrain("publish", "--run", "demo-2", env=env)
    assert result.returncode == 0, result.stderr
    release = next(
        release for release in github_api.releases if release["tag_name"] == "demo-v2"
    )  # releases are numbered on their own
    names = {asset["name"] for asset in release["assets"]}
    assert {
        "evaluation.json",
        "evaluation-seed-0.jsonl",
        "evaluation-seed-2.jsonl",
    } <= names and "evaluation-baseline-demo-v1.jsonl" not in names
    sums = next(
        data
        for asset_id, (meta, data) in github_api.assets.items()
        if meta["name"] == "SHA256SUMS" and asset_id in {asset["id"] for asset in release["assets"]}
    )
    assert b"  evaluation-seed-1.jsonl\n" in sums
    result = tftrain("compare", "demo-2", "release:demo@latest", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (
        data["seeds"] == {"candidate": 3, "baseline": 3} and data["delta"] == 0.0 and data["baseline_ref"] == "demo-v2"
    )
