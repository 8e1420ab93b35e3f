"""The verdict through the real action path (nektos/act, self-hosted mode, GitHub's API stand-in):
a release made before `evaluation:` is re-evaluated by the evaluation script; a release with
evidence is judged seed by seed; a clearly worse candidate fails the step with fail-on-regression."""

from __future__ import annotations

import json
import subprocess

import pytest
from test_action import act, action_repo, pr_payload, tool_cache  # noqa: F401  (the module's runner tool cache)

pytestmark = pytest.mark.integration

# The "model" is its accuracy; every example's correctness is drawn from NumPy's generator, which
# tftrain seeds from TFTRAIN_SEED: seeds differ, a seed is the same twice.
TRAIN = """\
import json, os, sys
import numpy as np
accuracy = float(sys.argv[sys.argv.index("--accuracy") + 1]) if "--accuracy" in sys.argv else 0.9
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/accuracy.txt", "w").write(str(accuracy))
with open("outputs/eval.jsonl", "w") as out:
    for i in range(4000):
        out.write(json.dumps({"id": f"e{i}", "correct": int(np.random.random() < accuracy)}) + "\\n")
print(f"accuracy={accuracy}")
"""
EVAL = """\
import argparse, json, os
import numpy as np
parser = argparse.ArgumentParser()
parser.add_argument("--model")
parser.add_argument("--out")
args = parser.parse_args()
accuracy = float(open(os.path.join(args.model, "accuracy.txt")).read())
rng = np.random.default_rng(11)
with open(args.out, "w") as out:
    for i in range(4000):
        out.write(json.dumps({"id": f"e{i}", "correct": int(rng.random() < accuracy)}) + "\\n")
"""
PLAIN = 'name: demo\nentry_script: train.py\nmodel: {gate: "off"}\n'
EVALUATION = "evaluation:\n  per_example: outputs/eval.jsonl\n  metric: correct\n  seeds: 3\n  script: eval.py\n"


def _commit(root, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message], cwd=root, check=True)


def _workflow(root, event: str, regression: str | None = None) -> None:
    path = root / ".github" / "workflows" / "pr.yml"
    text = path.read_text().replace("on: pull_request", f"on: {event}").replace("on: push", f"on: {event}")
    if regression is not None and "fail-on-regression" not in text:
        text = text.replace(
            "          manifest: demo/tftrain.yml\n",
            f"          manifest: demo/tftrain.yml\n          fail-on-regression: '{regression}'\n",
        )
    text = (
        text.replace('echo "status=$STATUS', 'echo "verdict=$VERDICT status=$STATUS').replace(
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}",
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}\n          VERDICT: ${{"
            " steps.tftrain.outputs.verdict }}",
        )
        if "VERDICT" not in text
        else text
    )
    path.write_text(text)


def _release(root, home, github_api, tag: str) -> None:
    (root / "event.json").write_text(
        json.dumps({"ref": f"refs/tags/{tag}", "repository": {"full_name": "octo/models"}})
    )
    _workflow(root, "push")
    _commit(root, tag)
    result = act(root, home, github_api.url, event="push", ref=f"refs/tags/{tag}")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def _pull_request(root, home, github_api, regression: str | None = None):
    (root / "event.json").write_text(json.dumps(pr_payload()))
    _workflow(root, "pull_request", regression)
    _commit(root, "pr")
    return act(root, home, github_api.url)


def test_the_pull_requests_verdict_against_releases_before_and_after_evidence(repo, tmp_path, github_api):
    root = action_repo(tmp_path, repo, "demo/tftrain.yml")
    (root / "demo" / "train.py").write_text(TRAIN)
    (root / "demo" / "eval.py").write_text(EVAL)
    (root / "demo" / "tftrain.yml").write_text(PLAIN)
    home = tmp_path / "home"
    _release(root, home, github_api, "v1.0")  # a release made before this feature: no evidence
    (old,) = github_api.releases
    assert "evaluation.json" not in {a["name"] for a in old["assets"]}

    (root / "demo" / "tftrain.yml").write_text(PLAIN + EVALUATION)
    first = _pull_request(root, home, github_api)
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    (comment,) = github_api.comments.values()
    body = comment["body"]
    assert "### Verdict against the last release" in body and "vs demo@v1" in body and "(1 seed)" in body
    assert "demo@v1 re-evaluated on this run's set by eval.py" in body and "correct per seed:" in body
    assert "verdict=" in first.stdout

    _release(root, home, github_api, "v2.0")  # this code released, with its three seeds' evidence
    newest = max(github_api.releases, key=lambda release: release["id"])
    assets = {a["name"] for a in newest["assets"]}
    assert {"evaluation.json", "evaluation-seed-0.jsonl", "evaluation-seed-2.jsonl"} <= assets

    (root / "demo" / "tftrain.yml").write_text(PLAIN + "script_params:\n  --accuracy: 0.8\n" + EVALUATION)
    worse = _pull_request(root, home, github_api, regression="0.01")
    assert worse.returncode != 0  # the verdict is worse: the step fails
    assert "the verdict is worse: correct 0.7" in worse.stdout, worse.stdout[-6000:]
    (comment,) = github_api.comments.values()  # the same comment, updated
    assert "(3 seeds) vs demo@v" in comment["body"] and "→ worse at ±1.0 pp" in comment["body"]
