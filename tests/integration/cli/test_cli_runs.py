"""The CLI around real runs: plan closes what it opens, logs of a run, models of a run that wrote none or was canceled."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import TFTRAIN


def test_plan_closes_what_it_opens(project, home):
    # the dry run's quiet logger writes to /dev/null: that file is closed, not left to the collector
    result = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-m", "runner", "plan", "-f", str(project())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "ResourceWarning" not in result.stderr


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
