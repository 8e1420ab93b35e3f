"""Failures, time limits, cancellation, orphans and floods of output, through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TFTRAIN
from watching import alive, run_status, wait_for

pytestmark = pytest.mark.integration


def phases(home: Path, run_id: str) -> list[str]:
    with sqlite3.connect(home / "tftrain.db") as db:
        return [
            row[0] for row in db.execute("SELECT phase FROM phases WHERE run_id = ? ORDER BY started, rowid", (run_id,))
        ]


FAILING = """\
import sys
def divide(x):
    return x / 0
print("about to fail", flush=True)
divide(1)
"""


def test_failing_script_names_file_line_and_error(project, cli, home):
    result = cli("run", "-f", str(project(script=FAILING)))
    assert result.returncode == 10
    assert "tftrain: error: run demo-1 Failed: train.py:3: ZeroDivisionError: division by zero" in result.stderr
    assert "Traceback" not in result.stderr  # tftrain's own error is one line; the script's is in its log
    assert run_status(home, "demo-1") == "Failed"
    assert phases(home, "demo-1") == ["Queued", "Preparing", "Running", "PostProcessing", "Failed"]
    log = home / "runs" / "demo-1" / "workdir" / "logs" / "0.log"
    assert "about to fail" in log.read_text() and "ZeroDivisionError" in log.read_text()
    record = json.loads((home / "runs" / "demo-1" / "run.json").read_text())
    assert record["status"] == "Failed" and record["exit_code"] == 10


def test_exit_code_without_traceback(project, cli, home):
    result = cli("run", "-f", str(project(script="import sys\nprint('bye')\nsys.exit(3)\n")))
    assert result.returncode == 10
    assert "train.py exited with code 3" in result.stderr


def test_missing_interpreter_module_fails_in_running(project, cli, home):
    result = cli("run", "-f", str(project(script="import not_installed_anywhere\n")))
    assert result.returncode == 10
    assert "train.py:1: ModuleNotFoundError: No module named 'not_installed_anywhere'" in result.stderr


ORPHANS = """\
import os, subprocess, sys, time
escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
child = subprocess.Popen(["sleep", "1000"])
open("outputs/pids", "w").write(f"{escaped.pid} {child.pid} {os.getpid()}")
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""


def test_time_limit_kills_the_whole_tree(project, cli, home):
    path = project(
        script=ORPHANS,
        manifest="max_run_duration_seconds: 3\nscript_params:\n  '1000': true\ncompute:\n  kill_grace_seconds: 1\n",
    )
    started = time.monotonic()
    result = cli("run", "-f", str(path), timeout=60)
    assert result.returncode == 11, result.stderr
    assert time.monotonic() - started < 30
    assert "TimedOut: max_run_duration_seconds (3s) reached" in result.stderr
    pids = [int(p) for p in (home / "runs/demo-1/workdir/outputs/pids").read_text().split()]
    assert not any(alive(pid) for pid in pids), "a process of the run survived"
    assert run_status(home, "demo-1") == "TimedOut"
    assert (home / "runs/demo-1/run.json").exists()  # post-processing ran


def test_processes_left_behind_by_a_completed_script_are_stopped(project, cli, home):
    result = cli("run", "-f", str(project(script=ORPHANS, manifest="script_params:\n  '0.1': true\n")))
    assert result.returncode == 0, result.stderr
    pids = [int(p) for p in (home / "runs/demo-1/workdir/outputs/pids").read_text().split()]
    assert not any(alive(pid) for pid in pids)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_cancels_and_still_post_processes(project, home, sig):
    script = ORPHANS + "open('outputs/model', 'w').write('partial')\n"
    path = project(
        script=script,
        manifest=(
            "script_params:\n  '1000': true\ncompute:\n  kill_grace_seconds: 2\n"
            "metrics:\n  regex:\n    ready: 'ready()'\n"
        ),
    )
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = home / "runs/demo-1/workdir/logs/0.log"
    wait_for(log, "ready")
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 12, err
    assert f"{signal.Signals(sig).name}: stopping the training" in out
    assert "run demo-1 Canceled" in err
    assert run_status(home, "demo-1") == "Canceled"
    assert phases(home, "demo-1")[-2:] == ["PostProcessing", "Canceled"]
    pids = [int(p) for p in (home / "runs/demo-1/workdir/outputs/pids").read_text().split()]
    assert not any(alive(pid) for pid in pids)
    assert (home / "runs/demo-1/metrics.json").exists()


def test_a_million_lines(project, cli, home):
    script = (
        "import sys\nw = sys.stdout.write\nfor i in range(1_000_000):\n    w(f'line {i} of the"
        " flood\\n')\nprint('acc=0.5')\n"
    )
    path = project(script=script, manifest="metrics:\n  regex:\n    acc: 'acc=([0-9.]+)'\n")
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stderr
    log = home / "runs/demo-1/workdir/logs/0.log"
    with log.open("rb") as handle:
        assert sum(1 for _ in handle) == 1_000_001
    assert "line 999999 of the flood" in result.stdout or "lines not shown" in result.stdout
    metrics = [json.loads(line) for line in (home / "runs/demo-1/metrics.jsonl").read_text().splitlines()]
    assert [(m["name"], m["value"]) for m in metrics] == [("acc", 0.5)]


def test_an_unread_console_does_not_stall_training(project, home):
    """stdout is a pipe nobody reads: the script must still run to its end at full speed."""
    script = (
        "import time\nfor i in range(400_000):\n    print(f'{i:08d} ' + 'x' * 40)\n"
        "open('outputs/done', 'w').write(str(time.time()))\n"
    )
    path = project(script=script)
    process = subprocess.Popen([TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = home / "runs/demo-1/workdir/outputs/done"
    deadline = time.monotonic() + 120
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert done.exists(), "the training stalled behind a console nobody reads"
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    assert b"lines not shown (console too slow)" in out
    assert (home / "runs/demo-1/workdir/logs/0.log").stat().st_size == 400_000 * 50


def test_environment_and_working_directory(project, cli, home, monkeypatch):
    monkeypatch.setenv("INHERITED_BY_TRAINING", "yes")
    script = """\
import json, os, sys
keys = ["TFTRAIN_RUN_ID", "TFTRAIN_OUTPUTS_DIR", "TFTRAIN_LOGS_DIR", "TFTRAIN_METRICS_FILE", "MY_FLAG", "PYTHONUNBUFFERED"]
inherited = {k: os.environ.get(k) for k in ("PATH", "HOME", "INHERITED_BY_TRAINING")}
json.dump({"cwd": os.getcwd(), "env": {k: os.environ.get(k) for k in keys}, "inherited": inherited}, open("outputs/env.json", "w"))
"""
    result = cli("run", "-f", str(project(script=script, manifest="environment_variables:\n  MY_FLAG: true\n")))
    assert result.returncode == 0, result.stderr
    run_dir = home / "runs" / "demo-1"
    seen = json.loads((run_dir / "workdir/outputs/env.json").read_text())
    assert seen["cwd"] == str(run_dir / "workdir")
    assert seen["env"] == {
        "TFTRAIN_RUN_ID": "demo-1",
        "TFTRAIN_OUTPUTS_DIR": str(run_dir / "workdir/outputs"),
        "TFTRAIN_LOGS_DIR": str(run_dir / "workdir/logs"),
        "TFTRAIN_METRICS_FILE": str(run_dir / "metrics.d/0.jsonl"),
        "MY_FLAG": "true",
        "PYTHONUNBUFFERED": "1",
    }
    assert seen["inherited"] == {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "INHERITED_BY_TRAINING": "yes"}


def test_invalid_manifest_exit_code_and_nothing_recorded(project, cli, home):
    result = cli("run", "-f", str(project(manifest="epochs: 3\n")))
    assert result.returncode == 3
    assert result.stderr.count("\n") == 1 and "tftrain.yml:4: epochs: unknown key" in result.stderr
    assert not (home / "tftrain.db").exists()


def test_a_pool_job_without_a_pool_file_is_refused_before_a_run_starts(project, cli, home):
    result = cli("run", "-f", str(project(manifest="compute:\n  target: pool\n")))
    assert result.returncode == 3
    assert (
        "tftrain-pool.yml: pool file not found (compute.pool_file names it; `tftrain pool` also takes --pool)"
        in result.stderr
    )
    assert not (home / "runs").exists()


WRITER = """\
import os, sys
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.txt", "w").write(sys.argv[1] if len(sys.argv) > 1 else "first")
"""
READER = """\
import os, sys
print("resume", sys.argv[2], "env", os.environ["TFTRAIN_RESUME_FROM"])
print("data", os.environ["TFTRAIN_INPUT_DIGITS"], sys.argv[4])
print("weights", open(os.path.join(sys.argv[2], "weights.txt")).read())
open(os.path.join(sys.argv[2], "weights.txt"), "w").write("changed by the resumed run")
"""


@pytest.mark.parametrize("reference", ["run", "path", "model"])
def test_resume_from_a_run_a_path_or_a_model(project, cli, home, tmp_path, reference):
    assert cli("run", "-f", str(project(script=WRITER))).returncode == 0
    first_model = home / "runs/demo-1/workdir/outputs/model"
    resume = {"run": "demo-1", "path": str(first_model), "model": "model:demo@v1"}[reference]
    (tmp_path / "digits").mkdir()
    path = project(
        script=READER,
        manifest=(
            f"resume_from: '{resume}'\ninputs:\n  digits:\n    source: {tmp_path / 'digits'}\n"
            "script_params:\n  --resume: {resume_from: true}\n  --data: {input: digits}\n"
        ),
    )
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    log = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    resumed = first_model if reference == "path" else home / "runs/demo-2/resume"
    assert f"resume {resumed} env {resumed}" in log
    assert f"data {tmp_path / 'digits'} {tmp_path / 'digits'}" in log
    assert "weights first" in log
    if reference != "path":  # copied in: the source of the checkpoint is untouched
        assert (first_model / "weights.txt").read_text() == "first"
        assert cli("models", "pull", "demo@v1", "-o", str(tmp_path / "check")).returncode == 0


def test_resume_from_something_unknown_fails_in_preparing(project, cli, home):
    result = cli("run", "-f", str(project(manifest="resume_from: model:nothing@v9\n")))
    assert result.returncode == 4
    assert "resume_from: model nothing@v9 is not registered" in result.stderr
    assert run_status(home, "demo-1") == "Failed"
    assert phases(home, "demo-1") == ["Queued", "Preparing", "PostProcessing", "Failed"]


def test_resume_from_a_single_file_model_passes_the_file(project, cli, home):
    writer = "open('outputs/model.txt', 'w').write('weights v1')\n"
    assert cli("run", "-f", str(project(script=writer, manifest="model:\n  path: outputs/model.txt\n"))).returncode == 0
    reader = "import sys\nprint('read', open(sys.argv[2]).read())\n"
    path = project(
        script=reader, manifest="resume_from: model:demo@latest\nscript_params:\n  --from: {resume_from: true}\n"
    )
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "read weights v1" in (home / "runs/demo-2/workdir/logs/0.log").read_text()


def test_runs_list_the_commit(project, cli, home):
    path = project()
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(command, cwd=path.parent, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path.parent, capture_output=True, text=True
    ).stdout.strip()
    assert cli("run", "-f", str(path)).returncode == 0
    assert commit[:10] in cli("runs").stdout
