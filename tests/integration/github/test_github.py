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

    baseline = {
        "primary": "accuracy",
        "metrics": {"accuracy": {"last": 0.9, "best": 0.9, "best_step": 3, "count": 3, "goal": "maximize"}},
    }
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
    github_api.fail("GET", "/repos/octo/models", 404)  # nothing to post: GitHub failing only costs the comparison
    degraded = tftrain("github", "comment", env=env)
    assert degraded.returncode == 0, degraded.stderr
    assert "not compared with it: GitHub: GET /repos/octo/models answered 404 Not Found" in degraded.stdout


GPU_JOB = "use_gpu: true\ncompute:\n  gpu_type: a100\n"
GPU_LABELS = ["self-hosted", "linux", "gpu", "a100"]


def runs_on(project, tmp_path, api, *args, **extra):
    env = github_env(api, tmp_path / "no-event.json", "push", GITHUB_OUTPUT=str(tmp_path / "output.txt"), **extra)
    return tftrain("github", "runs-on", "-f", str(project(manifest=GPU_JOB)), *args, env=env)


def test_runs_on_finds_an_online_runner_past_the_first_page(project, tmp_path, github_api):
    for index in range(31):  # GitHub lists 30 runners a page
        github_api.add_runner("octo", "models", f"cpu-{index}", ["self-hosted", "Linux", "X64"])
    github_api.add_runner("octo", "models", "gpu-1", ["self-hosted", "Linux", "X64", "gpu", "a100"], busy=True)
    github_api.add_runner("octo", "models", "gpu-2", ["self-hosted", "Linux", "X64", "gpu", "a100"])
    result = runs_on(project, tmp_path, github_api)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0]) == GPU_LABELS
    assert "runner check: 2 online runner(s) of octo/models can train this (gpu-1, gpu-2); idle: gpu-2" in result.stdout
    assert json.dumps(GPU_LABELS) in (tmp_path / "output.txt").read_text().splitlines()


def test_runs_on_fails_when_no_online_runner_has_the_labels(project, tmp_path, github_api):
    github_api.add_runner("octo", "models", "gpu-1", ["self-hosted", "Linux", "gpu", "v100"])
    github_api.add_runner("octo", "models", "gpu-2", ["self-hosted", "Linux", "gpu", "a100"], status="offline")
    result = runs_on(project, tmp_path, github_api)
    assert result.returncode == 19
    (line,) = result.stderr.splitlines()  # one line, no traceback
    assert line.startswith(
        "tftrain: error: no online self-hosted runner of octo/models has the labels self-hosted, linux, gpu, a100; its"
        " runners: gpu-1 (online: self-hosted, Linux, gpu, v100), gpu-2 (offline: self-hosted, Linux, gpu, a100)"
    )
    assert "::error::no online self-hosted runner of octo/models" in result.stdout
    assert json.dumps(GPU_LABELS) in (tmp_path / "output.txt").read_text().splitlines()


def test_runs_on_says_when_the_repository_has_no_runners(project, tmp_path, github_api):
    result = runs_on(project, tmp_path, github_api)
    assert result.returncode == 19
    assert (
        "octo/models has no self-hosted runners: add one with the labels self-hosted, linux, gpu, a100 (Settings →"
        " Actions → Runners)" in result.stderr
    )


def test_runs_on_skips_the_check_when_the_token_cannot_list_runners(project, tmp_path, github_api):
    github_api.runners_forbidden = True  # the job's GITHUB_TOKEN
    result = runs_on(project, tmp_path, github_api)
    assert result.returncode == 0, result.stderr
    assert (
        "::warning::runner check skipped: this token cannot list the self-hosted runners of octo/models"
        in result.stdout
    )
    assert "Resource not accessible by integration" in result.stdout and "runners-token" in result.stdout


def test_runs_on_skips_the_check_when_github_fails(project, tmp_path, github_api):
    github_api.fail("GET", "/repos/octo/models/actions/runners", 500)
    result = runs_on(project, tmp_path, github_api)
    assert result.returncode == 0, result.stderr
    assert (
        "::warning::runner check skipped: could not list the runners of octo/models: "
        "GitHub: GET /repos/octo/models/actions/runners answered 500 Internal Server Error\n" in result.stdout
    )


def test_runs_on_prefers_the_runners_token(project, tmp_path, github_api):
    github_api.add_runner("octo", "models", "gpu-1", GPU_LABELS)
    result = runs_on(project, tmp_path, github_api, INPUT_GITHUB_TOKEN="ghs_other", INPUT_RUNNERS_TOKEN="ghs_test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "can train this (gpu-1)" in result.stdout


def test_runs_on_without_a_token_skips_the_check(project, tmp_path, github_api):
    result = runs_on(project, tmp_path, github_api, INPUT_GITHUB_TOKEN="", GITHUB_TOKEN="", INPUT_RUNNERS_TOKEN="")
    assert result.returncode == 0, result.stderr
    assert "runner check skipped: no token" in result.stdout
    assert ("GET", "/repos/octo/models/actions/runners") not in github_api.requests
    forced = runs_on(
        project, tmp_path, github_api, "--check-runners", INPUT_GITHUB_TOKEN="", GITHUB_TOKEN="", INPUT_RUNNERS_TOKEN=""
    )
    assert forced.returncode == 7 and "--check-runners needs a token" in forced.stderr
    off = runs_on(project, tmp_path, github_api, "--no-check-runners")
    assert off.returncode == 0 and github_api.requests == []


def one_error_line(result) -> str:
    """The single `tftrain: error:` line of a failed command (and no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error:")]
    return line[len("tftrain: error: ") :]


BASELINE = {
    "primary": "accuracy",
    "metrics": {"accuracy": {"last": 0.9, "best": 0.9, "best_step": 3, "count": 3, "goal": "maximize"}},
}


@pytest.mark.parametrize(
    ("failing", "status", "said"),
    [
        ("asset", 404, "answered 404 Not Found"),
        ("asset", 500, "answered 500 Internal Server Error"),
        ("asset", 0, "got no answer: Remote end closed connection without response"),
        ("releases", 503, "answered 503 Service Unavailable"),
    ],
)
def test_the_comment_goes_without_a_baseline_that_cannot_be_fetched(
    project, home, tmp_path, github_api, failing, status, said
):
    release = github_api.add_release("octo", "models", "demo-v3", {"metrics.json": json.dumps(BASELINE).encode()})
    path = {
        "asset": f"/repos/octo/models/releases/assets/{release['assets'][0]['id']}",
        "releases": "/repos/octo/models/releases",
    }[failing]
    github_api.fail("GET", path, status)
    env = github_env(github_api, pr_event(tmp_path))
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("github", "comment", "--fail-on-regression", "0.1", env=env)  # 0.75 vs 0.9 would fail, if compared
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "tftrain: error" not in result.stderr
    (comment,) = github_api.comments.values()
    note = (
        f"The last released model could not be fetched, so this run is not compared with it: GitHub: GET {path} {said}"
    )
    assert note in comment["body"], comment["body"]
    assert "| this run | demo-v3 |" not in comment["body"]
    assert f"::warning::{note}" in result.stdout
    assert "fail-on-regression (0.1) was not checked" in result.stdout


def test_the_comment_goes_without_a_baseline_that_is_not_json(project, home, tmp_path, github_api):
    github_api.add_release("octo", "models", "demo-v3", {"metrics.json": b"<html>oops</html>"})
    env = github_env(github_api, pr_event(tmp_path))
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("github", "comment", env=env)
    assert result.returncode == 0, result.stderr
    (comment,) = github_api.comments.values()
    assert "not compared with it: GitHub: metrics.json of demo-v3 is not a JSON object" in comment["body"]


@pytest.mark.parametrize(
    ("method", "path", "status", "line"),
    [
        ("GET", "/repos/octo/models/issues/7", 404, "GitHub: GET /repos/octo/models/issues/7 answered 404 Not Found"),
        (
            "POST",
            "/repos/octo/models/issues/7/comments",
            500,
            "GitHub: POST /repos/octo/models/issues/7/comments answered 500 Internal Server Error",
        ),
        ("GET", "/repos/octo/models", 502, "GitHub: GET /repos/octo/models answered 502 Bad Gateway"),
        (
            "GET",
            "/repos/octo/models/issues/7/comments",
            0,
            (
                "GitHub: GET /repos/octo/models/issues/7/comments got no answer: "
                "Remote end closed connection without response"
            ),
        ),
    ],
)
def test_a_comment_that_cannot_be_posted_fails_with_one_line(
    project, home, tmp_path, github_api, method, path, status, line
):
    env = github_env(github_api, pr_event(tmp_path))
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    github_api.fail(method, path, status)
    result = tftrain("github", "comment", env=env)
    assert result.returncode == 23
    assert one_error_line(result) == line
    assert "ghs_test" not in result.stderr + result.stdout
    assert github_api.comments == {}


def test_an_unreachable_github_fails_with_one_line(project, home, tmp_path):
    env = github_env(None, pr_event(tmp_path))  # nothing listens on port 9
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("github", "comment", env=env)
    assert result.returncode == 23
    assert one_error_line(result) == "GitHub: GET /repos/octo/models got no answer: Connection refused"


def _serving(width: int) -> dict:
    tensor = {"name": "x", "dtype": "float32", "shape": [None, width]}
    return {
        "signatures": {
            "serving_default": {"inputs": [tensor], "outputs": [{"name": "y", "dtype": "float32", "shape": [None, 2]}]}
        }
    }


def test_the_comment_flags_a_changed_serving_signature(project, home, tmp_path, github_api):
    env = github_env(github_api, pr_event(tmp_path))
    baseline = {
        "primary": "accuracy",
        "metrics": {"accuracy": {"last": 0.7, "best": 0.7, "best_step": 3, "count": 3, "goal": "maximize"}},
    }
    github_api.add_release(
        "octo",
        "models",
        "demo-v3",
        {"metrics.json": json.dumps(baseline).encode(), "serving.json": json.dumps(_serving(16)).encode()},
    )
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    # what the gate recorded for this run (its model here is no TensorFlow model: written as the gate writes it)
    serving = home / "runs" / "demo-1" / "serving"
    serving.mkdir()
    (serving / "serving.json").write_text(json.dumps(_serving(32)))
    done = tftrain("github", "comment", env=env)
    assert done.returncode == 0, done.stderr
    (comment,) = github_api.comments.values()
    assert (
        "**Serving signature changed** since demo-v3:\n\n- breaking: input `x` shape (None, 16) → (None, 32)\n"
        in comment["body"]
    )
    (serving / "serving.json").write_text(json.dumps(_serving(16)))
    assert tftrain("github", "comment", env=env).returncode == 0
    (comment,) = github_api.comments.values()
    assert "Serving signature: unchanged since demo-v3." in comment["body"]
