from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner.manifest import load_manifest
from runner.plan.argv import script_args, script_path
from runner.plan.model import PlanContext


def script_argv(manifest, python: str, inputs: dict | None = None, resume: Path | None = None) -> list[str]:
    """The training's argv as the run plans it (runner.training.prepare builds the same PlanContext)."""
    ctx = PlanContext(manifest, "local", python, None, {}, tuple(script_args(manifest, inputs, resume)))
    return list(ctx.script_argv)


def test_values_become_separate_arguments(project):
    manifest = load_manifest(
        project(
            manifest=(
                "script_params:\n  --batch-size: 50\n  --lr: 0.001\n  --layers: [64, 32]\n"
                "  --amp: true\n  --no-amp: false\n  --verbose:\n  positional: value\n"
            )
        )
    ).manifest
    assert script_argv(manifest, "python") == [
        "python",
        "train.py",
        "--batch-size",
        "50",
        "--lr",
        "0.001",
        "--layers",
        "64",
        "32",
        "--amp",
        "--verbose",
        "positional",
        "value",
    ]


def test_input_and_resume_references(project, tmp_path):
    path = project(
        manifest=(
            "inputs:\n  digits:\n    source: .\nresume_from: model:x@v1\n"
            "script_params:\n  --data: {input: digits}\n  --resume-from: {resume_from: true}\n"
        )
    )
    manifest = load_manifest(path).manifest
    argv = script_argv(manifest, "python", {"digits": tmp_path / "d"}, tmp_path / "ckpt")
    assert argv[2:] == ["--data", str(tmp_path / "d"), "--resume-from", str(tmp_path / "ckpt")]


def test_the_script_is_never_read_as_an_interpreter_option():
    for name in ("-c", "-", "-m", "--help", "-Werror"):
        assert script_path(name) == f"./{name}"
    assert script_path("train.py") == "train.py" and script_path("sub/-c") == "sub/-c"


@pytest.mark.integration
def test_a_script_named_like_an_option_runs_as_a_script(project):
    """`entry_script: -c` and a parameter of Python code: the script runs with the code as its
    argument; python never runs the code."""
    code = "import os; open('INJECTED', 'w')"
    path = project(manifest=f"script_params:\n  {json.dumps(code)}: true\n")
    path.write_text(path.read_text().replace("entry_script: train.py", "entry_script: '-c'"))
    source = path.parent / "src"
    (source / "-c").write_text("import json, sys\njson.dump(sys.argv[1:], open('ran.json', 'w'))\n")
    argv = script_argv(load_manifest(path).manifest, sys.executable)
    subprocess.run(argv, cwd=source, check=True, timeout=60)
    assert not (source / "INJECTED").exists()
    assert json.loads((source / "ran.json").read_text()) == [code]
