"""The pull-request comment and the model card state the run's GPU-hours and cost, against the last
release's usage.json ("+12 % GPU-hours for +0.4 % accuracy"); the release carries usage.json."""

from __future__ import annotations

import json
import re

import pytest
from test_github import SCRIPT, github_env, pr_event, tftrain
from test_publish import SCRIPT as MODEL_SCRIPT
from test_publish import asset_bytes, env_for

pytestmark = pytest.mark.integration

PRICED = "compute:\n  cost: {cpu_hour: 36.0}\n"
BASELINE = {
    "primary": "accuracy",
    "metrics": {"accuracy": {"last": 0.9, "best": 0.9, "best_step": 3, "count": 3, "goal": "maximize"}},
}


def released_usage(cost: float) -> bytes:
    seconds = cost * 100  # 36 an hour: 0.01 a second
    return json.dumps(
        {
            "wall_seconds": seconds,
            "processes": 1,
            "cpu_seconds": seconds,
            "prices": {"gpu_hour": 0, "cpu_hour": 36.0},
            "cost": cost,
        }
    ).encode()


def test_the_comment_sets_this_runs_cost_against_the_last_release(project, home, tmp_path, github_api):
    env = github_env(github_api, pr_event(tmp_path))
    github_api.add_release(
        "octo", "models", "demo-v3", {"metrics.json": json.dumps(BASELINE).encode(), "usage.json": released_usage(1.0)}
    )
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=PRICED)), env=env).returncode == 0
    done = tftrain("github", "comment", env=env)
    assert done.returncode == 0, done.stderr
    (comment,) = github_api.comments.values()
    body = comment["body"]
    assert "| usage | |" in body and "| GPU-hours (allocated) | 0 |" in body  # the run's summary
    # this run costs well under 1.0: its cost falls, and its accuracy is 0.75 against 0.9
    assert re.search(
        r"Usage: 0 GPU-hours, [0-9.e-]+ CPU-hours, [0-9.e-]+ USD \([0-9.]+ s\)\. Against demo-v3: -\d+ % cost for"
        r" -16\.7 % accuracy\.",
        body,
    ), body


@pytest.mark.parametrize("hostile", [b"[]", b'{"cost": "free"}', b"\xff\xfe"])
def test_a_released_usage_json_that_is_no_usage_is_said_so(project, home, tmp_path, github_api, hostile):
    env = github_env(github_api, pr_event(tmp_path))
    github_api.add_release(
        "octo", "models", "demo-v3", {"metrics.json": json.dumps(BASELINE).encode(), "usage.json": hostile}
    )
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=PRICED)), env=env).returncode == 0
    done = tftrain("github", "comment", env=env)
    assert done.returncode == 0, done.stderr  # the comment goes without the comparison, saying why
    if not hostile.startswith(b"{"):
        assert (
            "the released model's usage could not be fetched: GitHub: usage.json of demo-v3 is not a JSON object"
            in done.stdout
        )
    (comment,) = github_api.comments.values()
    assert "demo-v3 recorded no usage to compare with." in comment["body"]


def test_the_release_carries_usage_json_and_the_card_compares(stand_in_project, home, github_api):
    env = env_for(github_api)
    path = stand_in_project(script=MODEL_SCRIPT, manifest=PRICED)
    for run in ("demo-1", "demo-2"):
        assert tftrain("run", "-f", str(path), env=env).returncode == 0
        published = tftrain("publish", "--run", run, env=env)
        assert published.returncode == 0, published.stderr
    by_tag = {release["tag_name"]: release for release in github_api.releases}
    first, second = by_tag["demo-v1"], by_tag["demo-v2"]
    usage = json.loads(asset_bytes(github_api, first, "usage.json"))
    assert usage == json.loads((home / "runs" / "demo-1" / "run.json").read_text())["usage"]
    assert "## Usage and cost" in first["body"] and "Against" not in first["body"]  # nothing released before it
    card = asset_bytes(github_api, second, "MODEL_CARD.md").decode()
    assert "## Usage and cost" in card and re.search(
        r"Against demo-v1: [+-]\d+ % cost for \+0\.0 % accuracy\.", card
    ), card
