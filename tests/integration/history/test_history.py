"""The run history survives what happens to it: a damaged or deleted tftrain.db, tftrain killed
in the middle of a run, a full disk. Real CLI, real SQLite files, a real tmpfs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import history_damage as damage
import pytest
from conftest import TFTRAIN, tftrain

pytestmark = pytest.mark.integration

TRAIN = """\
import os
os.makedirs("outputs/model", exist_ok=True)
with open("outputs/model/weights.bin", "w") as handle:
    handle.write("weights")
print("loss=0.25", flush=True)
"""
MANIFEST = "model: {path: outputs/model}\nmetrics: {regex: {loss: 'loss=([0-9.]+)'}}\n"


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The command failed with exactly one line of its own, and no traceback."""
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error: ")]
    assert len(errors) == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return errors[0]


@pytest.fixture(scope="module")
def template(tmp_path_factory, env_cache) -> tuple[Path, Path]:
    """One history with one completed run (demo-1) that registered demo@v1, made once by the CLI."""
    root = tmp_path_factory.mktemp("template")
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text(TRAIN)
    manifest = root / "tftrain.yml"
    manifest.write_text("name: demo\nsource_directory: src\nentry_script: train.py\n" + MANIFEST)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TFTRAIN_HOME", str(root / "home"))
        patch.setenv("TFTRAIN_CACHE_DIR", str(env_cache))
        result = tftrain("run", "-f", str(manifest))
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(root / "home" / "tftrain.db") as db:  # the index as one file, as damage finds it
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    return root / "home", manifest


@pytest.fixture
def trained(template, home) -> Path:
    """A copy of the template history as this test's TFTRAIN_HOME; returns the manifest."""
    source, manifest = template
    shutil.copytree(source, home, symlinks=True)
    with sqlite3.connect(home / "tftrain.db") as db:
        db.execute("UPDATE runs SET run_dir = replace(run_dir, ?, ?)", (str(source), str(home)))
        db.execute("UPDATE models SET path = replace(path, ?, ?)", (str(source), str(home)))
    db.close()
    return manifest


DAMAGE = {
    "truncated": damage.truncated,
    "garbage": lambda db: db.write_bytes(os.urandom(16384)),
    "text": lambda db: db.write_text("this is not a database\n" * 200),
    "directory": damage.directory,
    "dropped-column": damage.sql("ALTER TABLE runs DROP COLUMN exit_code"),
    "invalid-json": damage.sql("UPDATE runs SET git = '{\"commit\": '"),
}
COMMANDS = [("runs",), ("runs", "show", "demo-1"), ("logs", "demo-1"), ("metrics", "demo-1"), ("models",)]


def all_at_once(commands: list[tuple[str, ...]]) -> list[subprocess.CompletedProcess]:
    started = [
        subprocess.Popen(
            [TFTRAIN, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        for command in commands
    ]
    results = []
    for command, process in zip(commands, started):
        out, err = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess([TFTRAIN, *command], process.returncode, out, err))
    return results


def check_commands_refuse(home: Path, manifest: Path, reason: str) -> None:
    commands = [*COMMANDS, ("run", "-f", str(manifest))]
    for command, result in zip(commands, all_at_once(commands)):
        assert result.returncode == 21, (command, result.stdout, result.stderr)
        line = one_error_line(result)
        assert str(home / "tftrain.db") in line and reason in line, (command, line)
    assert sorted(path.name for path in (home / "runs").iterdir()) == ["demo-1"]  # `run` recorded nothing


def check_commands_work(cli, manifest: Path, everything: bool = True) -> None:
    shown = cli("runs", "show", "1")
    assert shown.returncode == 0 and "run demo-1: Completed" in shown.stdout, shown.stderr
    assert "Running" in shown.stdout and "outputs/model/weights.bin" in shown.stdout  # phases and files
    models = cli("models")
    assert models.returncode == 0 and re.search(r"demo\s.*v1\s.*demo-1", models.stdout), models.stdout
    if not everything:
        return
    assert "demo-1" in cli("runs").stdout
    assert cli("logs", "demo-1").stdout == "loss=0.25\n"
    metrics = cli("metrics", "demo-1", "--json")
    assert metrics.returncode == 0 and json.loads(metrics.stdout.splitlines()[0])["value"] == 0.25
    again = cli("run", "-f", str(manifest))
    assert again.returncode == 0 and "run demo-2 (queued)" in again.stdout and "demo@v2" in again.stdout, again.stderr


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_index_one_line_then_doctor_rebuilds_it(case, trained, cli, home):
    before = damage.digest(home / "runs" / "demo-1")
    DAMAGE[case](home / "tftrain.db")
    check_commands_refuse(home, trained, "is damaged (")

    doctor = cli("doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert "rebuilt" in doctor.stdout and "1 run (5 phases) and 1 model version" in doctor.stdout, doctor.stdout
    kept = [path.name for path in home.iterdir() if path.name.startswith("tftrain.db.damaged-")]
    assert kept, "the damaged file is kept aside"
    assert damage.digest(home / "runs" / "demo-1") == before
    everything = case == "garbage"  # every command once; the other cases, the run and the model again
    check_commands_work(cli, trained, everything)
    healthy = "ok (2 runs, 2 model versions)" if everything else "ok (1 run, 1 model version)"
    assert healthy in cli("doctor").stdout


@contextmanager
def unwritable(path: Path):
    """The file made immutable (chattr +i); where the filesystem has no such flag, a read-only bind mount."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        undo = ["chattr", "-i", str(path)]
    else:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
        undo = ["umount", str(path)]
    try:
        yield
    finally:
        subprocess.run(undo, check=True)


def test_immutable_index_one_line_and_doctor_says_what_to_do(trained, cli, home):
    with unwritable(home / "tftrain.db"):
        check_commands_refuse(home, trained, "is read-only")
        doctor = cli("doctor")
        assert doctor.returncode == 21
        assert "cannot move" in one_error_line(doctor) and str(home / "tftrain.db") in doctor.stderr
    check_commands_work(cli, trained)


@pytest.mark.parametrize("how", ["rm", "truncate-to-0"])
def test_lost_index_is_rebuilt_and_nothing_is_reused(how, trained, cli, home):
    runs_before, model_before = damage.digest(home / "runs" / "demo-1"), damage.digest(home / "models" / "demo" / "v1")
    if how == "rm":
        (home / "tftrain.db").unlink()
    else:
        (home / "tftrain.db").write_bytes(b"")
    result = cli("run", "-f", str(trained))
    assert result.returncode == 0, result.stderr
    assert "was missing: rebuilt it from 1 run (5 phases) and 1 model version" in result.stdout + result.stderr
    assert "run demo-2 (queued)" in result.stdout and "registered model demo@v2" in result.stdout
    assert damage.digest(home / "runs" / "demo-1") == runs_before
    assert damage.digest(home / "models" / "demo" / "v1") == model_before
    listed = cli("runs").stdout
    assert "demo-1" in listed and "demo-2" in listed
    assert cli("logs", "demo-1").stdout == "loss=0.25\n"


SLEEPER = """\
import os, time
print("started", os.getpid(), flush=True)
time.sleep(300)
"""


def test_killed_tftrain_leaves_a_failed_run_not_a_running_one(project, cli, home):
    manifest = project(script=SLEEPER, name="sleeper")
    run = subprocess.Popen([TFTRAIN, "run", "-f", str(manifest)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = home / "runs" / "sleeper-1" / "workdir" / "logs" / "0.log"
    script = None
    try:
        deadline = time.monotonic() + 60
        while script is None and time.monotonic() < deadline:
            found = re.search(r"started (\d+)", log.read_text()) if log.exists() else None
            script = int(found[1]) if found else None
            time.sleep(0.05)
        assert script, "the training never started"
        follow = subprocess.Popen(
            [TFTRAIN, "logs", "sleeper-1", "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(0.5)
        run.send_signal(signal.SIGKILL)
        run.wait()
        out, err = follow.communicate(timeout=60)  # it ends: the run is found lost while following
        assert follow.returncode == 0 and "started" in out, err

        listed = cli("runs")
        assert listed.returncode == 0
        assert re.search(rf"sleeper-1\s.*Failed\s.*lost: tftrain process {run.pid} ended", listed.stdout), listed.stdout
        record = json.loads((home / "runs" / "sleeper-1" / "run.json").read_text())
        assert (record["status"], record["exit_code"], record["message"]) == (
            "Failed",
            1,
            f"lost: tftrain process {run.pid} ended",
        )
        assert [phase["phase"] for phase in record["phases"]] == ["Queued", "Preparing", "Running", "Failed"]
        again = cli("runs", "show", "sleeper-1")
        assert "run sleeper-1: Failed: lost" in again.stdout and "marked Failed" not in again.stderr  # judged once
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if script:
            try:
                os.kill(script, signal.SIGKILL)
            except ProcessLookupError:
                pass


FILLER = """\
import os, time
os.makedirs("outputs", exist_ok=True)
print("filling the disk", flush=True)
while "filling the disk" not in open("logs/0.log").read():  # the line is on disk before the disk is full
    time.sleep(0.05)
with open("outputs/big.bin", "wb", buffering=0) as handle:
    for size in (1 << 20, 4096, 1):
        try:
            while True:
                handle.write(b"x" * size)
        except OSError:
            pass
"""


@pytest.fixture
def small_home(tmp_path, monkeypatch):
    """TFTRAIN_HOME on a 20 MB tmpfs."""
    home = tmp_path / "small-home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(home)], check=True)
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    yield home
    subprocess.run(["umount", "--lazy", str(home)], check=True)


def test_full_disk_fails_the_run_and_keeps_what_was_written(project, cli, small_home):
    result = cli("run", "-f", str(project(script=FILLER, name="filler")))
    assert result.returncode == 22, result.stdout + result.stderr
    line = one_error_line(result)
    assert re.fullmatch(rf"tftrain: error: disk full writing {re.escape(str(small_home))}/\S+", line), line
    run_dir = small_home / "runs" / "filler-1"
    assert (run_dir / "workdir" / "outputs" / "big.bin").stat().st_size > 15 << 20  # outputs kept
    assert "filling the disk" in (run_dir / "workdir" / "logs" / "0.log").read_text()  # logs kept
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "Failed" and "disk full writing" in record["message"]
    listed = cli("runs")  # reading the history needs no space
    assert listed.returncode == 0 and re.search(r"filler-1\s.*Failed", listed.stdout), listed.stdout + listed.stderr
    shutil.rmtree(run_dir / "workdir" / "outputs")
    # and it goes on once there is room
    assert cli("run", "-f", str(project(script=TRAIN, name="filler"))).returncode == 0


def test_every_command_that_reconciles_says_what_it_marked(project, cli, home):
    """`models register` (like publish and the PR comment) judges the run's state: the lost run it
    finds is marked Failed and the user is told so, as `tftrain runs` tells it."""
    manifest = project(script=SLEEPER, name="sleeper")
    run = subprocess.Popen([TFTRAIN, "run", "-f", str(manifest)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = home / "runs" / "sleeper-1" / "workdir" / "logs" / "0.log"
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and "started" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        run.send_signal(signal.SIGKILL)
        run.wait()
        registered = cli("models", "register", "sleeper-1")
        assert registered.returncode == 6 and "wrote no model" in registered.stderr
        assert f"run sleeper-1 marked Failed (lost: tftrain process {run.pid} ended)" in registered.stdout
    finally:
        if run.poll() is None:
            run.kill()
