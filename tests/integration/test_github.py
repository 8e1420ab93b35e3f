"""The action's GitHub steps against a server speaking GitHub's REST protocol, through PyGithub."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import TFTRAIN

pytestmark = pytest.mark.integration

SCRIPT = "print('Epoch 1/1')\nprint('4/4 - 0s - accuracy: 0.75 - loss: 0.4')\n"


def pr_event(tmp_path, head="octo/models", labels=(), number=7):
    payload = {
        "number": number,
        "pull_request": {
            "number": number,
            "labels": [{"name": name} for name in labels],
            "head": {"ref": "feature", "repo": {"full_name": head}},
            "base": {"ref": "main", "repo": {"full_name": "octo/models"}},
        },
    }
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


def github_env(api, event, event_name="pull_request", **extra):
    return {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": api.url if api else "http://127.0.0.1:9",
        "INPUT_GITHUB_TOKEN": "ghs_test",
        **extra,
    }


def tftrain(*args, env):
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("head", "labels", "allow", "refused"),
    [
        ("someone/fork", (), "false", True),
        ("someone/fork", ("safe-to-train",), "false", False),
        ("someone/fork", (), "true", False),
        ("octo/models", (), "false", False),
    ],
)
def test_fork_policy(tmp_path, head, labels, allow, refused):
    env = github_env(None, pr_event(tmp_path, head, labels), INPUT_ALLOW_FORKS=allow)
    result = tftrain("github", "check", env=env)
    if refused:
        assert result.returncode == 16
        assert "refusing to train pull request #7 from the fork someone/fork" in result.stderr
        assert "add the label 'safe-to-train'" in result.stderr and "allow-forks: true" in result.stderr
        assert result.stdout.startswith("::error::refusing to train")
    else:
        assert result.returncode == 0, result.stderr


def test_push_events_are_not_pull_requests(tmp_path):
    event = tmp_path / "push.json"
    event.write_text(json.dumps({"ref": "refs/heads/main"}))
    assert tftrain("github", "check", env=github_env(None, event, "push")).returncode == 0


def test_sticky_comment_and_baseline(project, home, tmp_path, github_api):
    env = github_env(github_api, pr_event(tmp_path))
    path = project(script=SCRIPT)
    assert tftrain("run", "-f", str(path), env=env).returncode == 0
    first = tftrain("github", "comment", env=env)
    assert first.returncode == 0, first.stderr
    (comment,) = github_api.comments.values()
    assert comment["body"].startswith("<!-- tftrain:model=demo -->")
    assert "## ✅ demo-1: Completed" in comment["body"] and "No released model to compare with yet." in comment["body"]

    baseline = {"primary": "accuracy", "metrics": {"accuracy": {"last": 0.9, "best": 0.9, "best_step": 3, "count": 3, "goal": "maximize"}}}
    github_api.add_release("octo", "models", "demo-v3", {"metrics.json": json.dumps(baseline).encode()})
    github_api.add_release("octo", "models", "demo-v4", {"metrics.json": b"{}"}, draft=True)  # drafts are not baselines
    assert tftrain("run", "-f", str(path), env=env).returncode == 0
    second = tftrain("github", "comment", env=env)
    assert second.returncode == 0, second.stderr
    (comment,) = github_api.comments.values()  # updated, not duplicated
    assert "demo-2" in comment["body"]
    assert "| **accuracy** | 0.75 | 0.9 | -0.15 | worse |" in comment["body"]

    failing = tftrain("github", "comment", "--fail-on-regression", "0.1", env=env)
    assert failing.returncode == 15
    assert "accuracy is worse than demo-v3's by 0.15, more than fail-on-regression (0.1)" in failing.stderr
    assert tftrain("github", "comment", "--fail-on-regression", "0.2", env=env).returncode == 0


def test_a_read_only_token_skips_the_comment(project, home, tmp_path, github_api):
    github_api.read_only = True
    env = github_env(github_api, pr_event(tmp_path, head="someone/fork", labels=("safe-to-train",)))
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("github", "comment", env=env)
    assert result.returncode == 0, result.stderr
    assert "::notice::not commenting: this token cannot write to the pull request" in result.stdout
    assert github_api.comments == {}


def test_compare_only(project, home, tmp_path, github_api):
    env = github_env(github_api, pr_event(tmp_path), INPUT_COMMENT="false")
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("github", "comment", env=env)
    assert result.returncode == 0 and github_api.comments == {}
