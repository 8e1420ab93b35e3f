"""What tftrain writes for GitHub Actions: workflow commands, the step summary, step outputs."""

from __future__ import annotations

import os
import subprocess

from conftest import TFTRAIN

SCRIPT = """\
import os
print("Epoch 1/2")
print("4/4 - 0s - accuracy: 0.5 - loss: 0.9")
print("Epoch 2/2")
print("4/4 - 0s - accuracy: 0.75 - loss: 0.4")
print("token", os.environ["TFTRAIN_GH_TOKEN"])
if os.environ.get("FAIL"):
    raise RuntimeError("bad batch")
"""


def run_in_actions(path, tmp_path, extra_env=None):
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(path.parent),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "TFTRAIN_GH_TOKEN": "gh-s3cret",
        **(extra_env or {}),
    }
    return subprocess.run([TFTRAIN, "run", "-f", str(path)], capture_output=True, text=True, env=env, timeout=120)


def outputs(tmp_path) -> dict[str, str]:
    lines = (tmp_path / "output.txt").read_text().splitlines()
    values, index = {}, 0
    while index < len(lines):
        key, delimiter = lines[index].split("<<")
        end = lines.index(delimiter, index + 1)
        values[key] = "\n".join(lines[index + 1 : end])
        index = end + 1
    return values


def test_a_completed_run_in_actions(project, home, tmp_path):
    path = project(script=SCRIPT, manifest="secrets: [TFTRAIN_GH_TOKEN]\n")
    result = run_in_actions(path, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "::add-mask::gh-s3cret"  # before anything else
    assert "::group::Preparing" in lines and "::group::Running" in lines and lines.count("::endgroup::") == 3
    assert "token ***" in result.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "## ✅ demo-1: Completed" in summary and "| **accuracy** |" in summary
    assert "xychart-beta" in summary and "line [0.5, 0.75]" in summary
    values = outputs(tmp_path)
    assert values["run-id"] == "demo-1" and values["status"] == "Completed" and values["primary-metric"] == "0.75"
    assert '"primary": "accuracy"' in values["metrics"]


def test_a_failed_script_is_annotated_at_its_line(project, home, tmp_path):
    result = run_in_actions(project(script=SCRIPT, manifest="secrets: [TFTRAIN_GH_TOKEN]\n"), tmp_path, {"FAIL": "1"})
    assert result.returncode == 10
    assert "::error file=src/train.py,line=8::RuntimeError: bad batch" in result.stdout
    assert outputs(tmp_path)["status"] == "Failed"
    assert "## ❌ demo-1: Failed" in (tmp_path / "summary.md").read_text()


def test_manifest_errors_and_deprecations_are_annotated_at_the_yaml_line(project, home, tmp_path):
    result = run_in_actions(project(manifest="epochz: 3\n"), tmp_path)
    assert result.returncode == 3
    assert "::error file=tftrain.yml,line=4::epochz: unknown key" in result.stdout
    path = project(manifest="distributed_backend: ps\nnode_count: 2\ncompute:\n  slots_per_node: 2\n")
    result = subprocess.run(
        [TFTRAIN, "validate", "-f", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(path.parent)},
    )
    assert "::warning file=tftrain.yml,line=4::distributed_backend: distributed_backend is deprecated" in result.stdout


def test_nothing_of_this_outside_actions(project, home, tmp_path):
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(project(manifest="epochz: 3\n"))], capture_output=True, text=True
    )
    assert "::" not in result.stdout + result.stderr


def test_a_multi_line_secret_is_masked_in_actions_line_by_line(project, home, tmp_path):
    """GitHub masks what `::add-mask::` names, line by line: one command per line of the secret,
    before anything else; tftrain's own output, summary and outputs hold none of it."""
    secret = "first-line-1a2b\nsecond-line-3c4d\nthird-line-5e6f"
    script = SCRIPT + "for line in os.environ['TFTRAIN_GH_TOKEN'].splitlines():\n    print('part', line)\n"
    script += "from runner import log_metric\nlog_metric('m-' + os.environ['TFTRAIN_GH_TOKEN'].splitlines()[1], 1.0)\n"
    result = run_in_actions(
        project(script=script, manifest="secrets: [TFTRAIN_GH_TOKEN]\n"), tmp_path, {"TFTRAIN_GH_TOKEN": secret}
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [f"::add-mask::{line}" for line in secret.splitlines()]
    rest = (
        "\n".join(lines[3:])
        + result.stderr
        + (tmp_path / "summary.md").read_text()
        + (tmp_path / "output.txt").read_text()
    )
    assert not [line for line in secret.splitlines() if line in rest]
    assert "part ***" in rest and "m-***" in rest
