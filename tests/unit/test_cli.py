from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import TFTRAIN

from runner.templates import templates_dir


def test_version_and_schema(cli, repo):
    assert cli("--version").stdout.strip().startswith("tftrain ")
    assert cli("schema").stdout == (repo / "tftrain.schema.json").read_text()
    assert cli("pool", "schema").stdout == (repo / "tftrain-pool.schema.json").read_text()


def test_plan_prints_the_commands_without_running(project, cli, home):
    path = project(script="raise SystemExit('must not run')\n", manifest="script_params:\n  --epochs: 3\n")
    result = cli("plan", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "launcher:    single" in result.stdout
    assert "train.py --epochs 3" in result.stdout
    assert "env TFTRAIN_RUN_ID='$RUN_ID'" in result.stdout
    document = json.loads(cli("plan", "-f", str(path), "--json").stdout)
    assert document["tasks"][0]["argv"][1:] == ["train.py", "--epochs", "3"]
    assert not (home / "runs").exists()


def test_plan_closes_what_it_opens(project, home):
    # the dry run's quiet logger writes to /dev/null: that file is closed, not left to the collector
    result = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-m", "runner", "plan", "-f", str(project())],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "ResourceWarning" not in result.stderr


def test_unknown_run_and_model(cli, home):
    result = cli("runs", "show", "nope-3")
    assert result.returncode == 5 and "run 'nope-3' not found" in result.stderr
    result = cli("models", "pull", "nope@v1", "-o", str(home / "x"))
    assert result.returncode == 5 and "model nope@v1 is not registered" in result.stderr
    assert "no models registered yet" in cli("models").stdout
    assert "no runs yet" in cli("runs").stdout


def test_logs_rank_and_follow(project, cli, home):
    script = "import time\nfor i in range(5):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.3)\n"
    runner = subprocess.Popen([TFTRAIN, "run", "-f", str(project(script=script))], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (home / "runs/demo-1/workdir/logs/0.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    follow = cli("logs", "demo-1", "--follow", timeout=60)
    assert runner.wait(timeout=60) == 0
    assert follow.stdout.splitlines() == [f"tick {i}" for i in range(5)]
    missing = cli("logs", "demo-1", "--rank", "3")
    assert missing.returncode == 5 and "ranks with logs: 0" in missing.stderr


def test_model_not_written_is_a_warning_not_a_failure(project, cli, home):
    result = cli("run", "-f", str(project()))
    assert result.returncode == 0
    assert "model.path outputs/model was not written by the script; no model registered" in result.stdout


def test_register_a_canceled_runs_model_by_hand(project, cli, home):
    script = "import os, sys\nos.makedirs('outputs/model')\nopen('outputs/model/w', 'w').write('x')\nsys.exit(1)\n"
    assert cli("run", "-f", str(project(script=script))).returncode == 10
    result = cli("models", "register", "demo-1")
    assert result.returncode == 0 and "registered model demo@v1 from run demo-1 (Failed)" in result.stdout


def test_templates_ship_with_the_package():
    import runner

    package = templates_dir().parent
    if "site-packages" in runner.__file__:  # scripts/test installs tftrain non-editable
        assert package.name == "runner" and (package / "templates" / "run_summary.md.j2").exists()
    else:
        assert (package / "templates" / "run_summary.md.j2").exists()
