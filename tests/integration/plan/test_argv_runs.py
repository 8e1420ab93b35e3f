"""script_params reach the script verbatim: hostile values through a real run and the rendered launch script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

HOSTILE = {
    "--cmd": "$(touch /tmp/pwned-subst)",
    "--semi": "; rm -rf / #",
    "--tick": "`touch /tmp/pwned-tick`",
    "--quotes": 'it\'s "quoted"',
    "--newline": "line1\nline2",
    "--env": "${{ env.SECRET }} $HOME",
    "--glob": "*",
}


def _yaml_params(params: dict) -> str:
    return "script_params:\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)}\n" for k, v in params.items())


def test_hostile_values_are_passed_verbatim(project, cli, home, tmp_path):
    """Run the real thing: the script sees each value byte for byte; nothing was interpreted."""
    for marker in ("/tmp/pwned-subst", "/tmp/pwned-tick"):
        Path(marker).unlink(missing_ok=True)
    script = "import json, sys\njson.dump(sys.argv[1:], open('outputs/argv.json', 'w'))\n"
    path = project(
        script=script,
        manifest=_yaml_params(HOSTILE) + "environment_variables:\n  HOSTILE: '$(touch /tmp/pwned-subst)'\n",
    )
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
    path = project(
        script=script,
        manifest=_yaml_params(HOSTILE) + "environment_variables:\n  HOSTILE: '$(touch /tmp/pwned-subst)'\n",
    )
    out = tmp_path / "plan"
    result = cli("plan", "-f", str(path), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    (run_dir / "workdir").mkdir(parents=True)
    (run_dir / "workdir" / "train.py").write_text(script)
    shown = subprocess.run(
        ["sh", str(out / "task-0.sh")],
        capture_output=True,
        text=True,
        env={"RUN_DIR": str(run_dir), "PATH": "/usr/bin:/bin"},
    )
    assert shown.returncode == 0, shown.stderr
    argv, hostile = json.loads(shown.stdout)
    assert argv == [item for flag, value in HOSTILE.items() for item in (flag, value)]
    assert hostile == "$(touch /tmp/pwned-subst)"
    assert not Path("/tmp/pwned-subst").exists()
    plan = json.loads((out / "plan.json").read_text())
    assert plan["tasks"][0]["argv"][2:] == [item for flag, value in HOSTILE.items() for item in (flag, value)]
