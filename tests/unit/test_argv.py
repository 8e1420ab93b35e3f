from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner.plan.argv import script_args, script_path
from runner.manifest import load_manifest
from runner.plan.model import PlanContext

HOSTILE = {
    "--cmd": "$(touch /tmp/pwned-subst)",
    "--semi": "; rm -rf / #",
    "--tick": "`touch /tmp/pwned-tick`",
    "--quotes": "it's \"quoted\"",
    "--newline": "line1\nline2",
    "--env": "${{ env.SECRET }} $HOME",
    "--glob": "*",
}


def script_argv(manifest, python: str, inputs: dict | None = None, resume: Path | None = None) -> list[str]:
    """The training's argv as the run plans it (runner.run.prepare builds the same PlanContext)."""
    ctx = PlanContext(manifest, "local", python, None, {}, tuple(script_args(manifest, inputs, resume)))
    return list(ctx.script_argv)


def _yaml_params(params: dict) -> str:
    return "script_params:\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)}\n" for k, v in params.items())


def test_values_become_separate_arguments(project):
    manifest = load_manifest(
        project(
            manifest="script_params:\n  --batch-size: 50\n  --lr: 0.001\n  --layers: [64, 32]\n"
            "  --amp: true\n  --no-amp: false\n  --verbose:\n  positional: value\n"
        )
    ).manifest
    assert script_argv(manifest, "python") == [
        "python", "train.py", "--batch-size", "50", "--lr", "0.001", "--layers", "64", "32", "--amp", "--verbose", "positional", "value",
    ]


def test_input_and_resume_references(project, tmp_path):
    path = project(manifest="inputs:\n  digits:\n    source: .\nresume_from: model:x@v1\n"
                   "script_params:\n  --data: {input: digits}\n  --resume-from: {resume_from: true}\n")
    manifest = load_manifest(path).manifest
    argv = script_argv(manifest, "python", {"digits": tmp_path / "d"}, tmp_path / "ckpt")
    assert argv[2:] == ["--data", str(tmp_path / "d"), "--resume-from", str(tmp_path / "ckpt")]


def test_hostile_values_are_passed_verbatim(project, cli, home, tmp_path):
    """Run the real thing: the script sees each value byte for byte; nothing was interpreted."""
    for marker in ("/tmp/pwned-subst", "/tmp/pwned-tick"):
        Path(marker).unlink(missing_ok=True)
    script = "import json, sys\njson.dump(sys.argv[1:], open('outputs/argv.json', 'w'))\n"
    path = project(script=script, manifest=_yaml_params(HOSTILE) + "environment_variables:\n  HOSTILE: '$(touch /tmp/pwned-subst)'\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    argv = json.loads(next(home.glob("runs/*/workdir/outputs/argv.json")).read_text())
    expected = [item for flag, value in HOSTILE.items() for item in (flag, value)]
    assert argv == expected
    assert not Path("/tmp/pwned-subst").exists() and not Path("/tmp/pwned-tick").exists()


def test_rendered_launch_script_quotes_everything(project, cli, tmp_path):
    """`tftrain plan --output-dir` writes shell scripts: run them and compare the argv."""
    Path("/tmp/pwned-subst").unlink(missing_ok=True)
    script = "import json, os, sys\nprint(json.dumps([sys.argv[1:], os.environ['HOSTILE']]))\n"
    path = project(script=script, manifest=_yaml_params(HOSTILE) + "environment_variables:\n  HOSTILE: '$(touch /tmp/pwned-subst)'\n")
    out = tmp_path / "plan"
    result = cli("plan", "-f", str(path), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    (run_dir / "workdir").mkdir(parents=True)
    (run_dir / "workdir" / "train.py").write_text(script)
    shown = subprocess.run(
        ["sh", str(out / "task-0.sh")], capture_output=True, text=True, env={"RUN_DIR": str(run_dir), "PATH": "/usr/bin:/bin"}
    )
    assert shown.returncode == 0, shown.stderr
    argv, hostile = json.loads(shown.stdout)
    assert argv == [item for flag, value in HOSTILE.items() for item in (flag, value)]
    assert hostile == "$(touch /tmp/pwned-subst)"
    assert not Path("/tmp/pwned-subst").exists()
    plan = json.loads((out / "plan.json").read_text())
    assert plan["tasks"][0]["argv"][2:] == [item for flag, value in HOSTILE.items() for item in (flag, value)]


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
