"""examples/keras-verdict for real: a Keras classifier trained with three seeds, released, and the
pull request's comment against that release — the same code is never called better or worse, a
candidate trained on half wrong labels is worse and fails fail-on-regression."""

from __future__ import annotations

import json
import shutil
import subprocess

from conftest import TFTRAIN
from test_github import github_env, pr_event  # the GitHub environment the other comment tests use


def _tftrain(*args, env):
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, env=env, timeout=900)


def test_the_keras_example_is_judged_honestly_against_its_release(repo, home, tmp_path, github_api):
    example = tmp_path / "keras-verdict"
    shutil.copytree(
        repo / "examples" / "keras-verdict", example, ignore=shutil.ignore_patterns("outputs", "__pycache__")
    )
    manifest = example / "tftrain.yml"
    manifest.write_text(
        manifest.read_text().replace("  --epochs: 8\n", "  --epochs: 4\n")
    )  # the test's time; the verdict's logic is the same
    env = github_env(github_api, pr_event(tmp_path), TFTRAIN_HOME=str(home))

    released = _tftrain("run", "-f", str(manifest), env=env)
    assert released.returncode == 0, released.stdout[-3000:] + released.stderr
    assert _tftrain("publish", "--run", "keras-verdict-1", env=env).returncode == 0
    (release,) = github_api.releases
    assert {"evaluation.json", "evaluation-seed-0.jsonl", "evaluation-seed-1.jsonl", "evaluation-seed-2.jsonl"} <= {
        a["name"] for a in release["assets"]
    }

    same = _tftrain("run", "-f", str(manifest), env=env)
    assert same.returncode == 0, same.stderr
    comment = _tftrain("github", "comment", "--run", "keras-verdict-4", "--fail-on-regression", "0.005", env=env)
    assert comment.returncode == 0, comment.stdout[-3000:] + comment.stderr
    (posted,) = github_api.comments.values()
    assert "(3 seeds) vs keras-verdict-v1" in posted["body"] and "correct per seed:" in posted["body"]
    verdict = json.loads((home / "runs" / "keras-verdict-4" / "run.json").read_text())["evaluation"]["verdict"]
    assert verdict["verdict"] in ("equivalent", "inconclusive")  # the same code: never better or worse

    manifest.write_text(manifest.read_text().replace("  --epochs: 4\n", "  --epochs: 4\n  --label-noise: 0.5\n"))
    noisy = _tftrain("run", "-f", str(manifest), env=env)
    assert noisy.returncode == 0, noisy.stderr
    failed = _tftrain("github", "comment", "--run", "keras-verdict-7", "--fail-on-regression", "0.005", env=env)
    assert failed.returncode == 15 and "the verdict is worse: correct 0." in failed.stderr
    (posted,) = github_api.comments.values()
    assert "→ worse at ±0.5 pp" in posted["body"]
