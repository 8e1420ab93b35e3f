"""Hostile sweeps through the real CLI: a resumed sweep never repeats a value it drew, PostgreSQL
stopped mid-sweep is one StorageError line (exit 18) and resume, once it is back, leaves the sweep's
table and `tftrain runs` agreeing on every trial; a password from $NAME holding @ : / # works
against a real server and is shown or stored nowhere."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from urllib.parse import quote

import postgres
import pytest
from conftest import TFTRAIN
from hostile import assert_clean, assert_refused, files_containing, nothing_written_outside
from sweeping import show, sweep_manifest
from watching import alive, until

from runner.errors import StorageError, TrainingCanceled

pytestmark = pytest.mark.integration

postgres_server = postgres.postgres_server  # the session's server (tests/postgres.py)

UNIFORM_LR = "--lr: {type: uniform, min_value: 0.01, max_value: 0.2}"
HOSTILE_PASSWORD = "p@ss:w/rd#?&=%+ x"
STORAGE = "  storage: postgresql://sweeper:$SWEEP_DB_PASSWORD@127.0.0.1:{port}/{database}\n"
SECRETS = "secrets: [SWEEP_DB_PASSWORD]\n"
SECRET_FORMS = [HOSTILE_PASSWORD.encode(), quote(HOSTILE_PASSWORD, safe="").encode()]


def manifest_with(project, *, steps: int, pause: float, trials: int, concurrent: int, extra: str = "", tail: str = ""):
    path = sweep_manifest(project, steps=steps, pause=pause, trials=trials, concurrent=concurrent, extra=extra)
    text = path.read_text().replace("--lr: {type: choice, values: [0.01, 0.05, 0.1, 0.2]}", UNIFORM_LR)
    path.write_text(text + tail)
    return path


def fast(path) -> None:
    """The rest of each trial at once (resume)."""
    path.write_text(re.sub(r"--pause: [0-9.]+", "--pause: 0", path.read_text()))


def training(home, count: int) -> bool:
    return len(list((home / "runs").glob("demo-*/workdir/outputs/model/step"))) >= count


def interrupt(path, home, when, env=None) -> subprocess.CompletedProcess:
    """`tftrain run` on the sweep, stopped by `when` (called once `until` its condition holds)."""
    sweep = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        when(sweep)
        out, err = sweep.communicate(timeout=120)
    finally:
        sweep.kill()
    return subprocess.CompletedProcess(sweep.args, sweep.returncode, out, err)


def runs_say(cli, home) -> dict[str, str]:
    """Each run's status as `tftrain runs` lists it."""
    listed = cli("runs", "--limit", "100")
    assert_clean(listed)
    statuses = {}
    for line in listed.stdout.splitlines():
        cells = line.split()
        found = [cell for cell in cells if re.fullmatch(r"demo-\d+", cell)]
        status = [cell for cell in cells if cell in ("Completed", "Failed", "Canceled", "TimedOut", "Running")]
        if found and status:
            statuses[found[0]] = status[0]
    return statuses


def assert_one_truth(cli, home) -> list[dict]:
    """The sweep's table says of each trial what `tftrain runs` says of its run (TimedOut is Canceled)."""
    trials = show(cli, "demo-sweep-1")["trials"]
    runs = runs_say(cli, home)
    for trial in trials:
        expected = runs[trial["run_id"]]
        assert trial["status"] == ("Canceled" if expected == "TimedOut" else expected), (trial, runs)
    return trials


def assert_no_value_twice(trials: list[dict]) -> None:
    completed = [t["params"]["--lr"] for t in trials if t["status"] == "Completed"]
    assert len(completed) == len(set(completed)), completed


def test_a_resumed_sweep_never_repeats_a_value_it_drew(project, cli, home, tmp_path):
    """Seeded random, 5 trials, SIGINT while the 4th trains, resume: trials 4 and 5 replayed trials 0 and 1."""
    path = manifest_with(project, steps=60, pause=0.05, trials=5, concurrent=1)
    with nothing_written_outside(tmp_path, home, path.parent):
        stopped = interrupt(
            path,
            home,
            lambda sweep: (
                until(lambda: training(home, 4), "the 4th trial training", timeout=120),
                sweep.send_signal(signal.SIGINT),
            ),
        )
        assert_refused(stopped, TrainingCanceled, "tftrain sweep resume demo-sweep-1")
        fast(path)
        resumed = cli("sweep", "resume", "demo-sweep-1", "-f", str(path), timeout=300)
        assert_clean(resumed)
    trials = assert_one_truth(cli, home)
    assert [t["status"] for t in trials] == ["Completed"] * 3 + ["Canceled"] + ["Completed"] * 2
    assert trials[4]["params"] == trials[3]["params"]  # the stopped trial, run again from its checkpoint
    assert_no_value_twice(trials)
    assert trials[5]["params"]["--lr"] not in {t["params"]["--lr"] for t in trials[:4]}


def test_postgres_stopped_mid_sweep_is_one_storage_line_and_resume_agrees_with_the_runs(
    project, cli, home, tmp_path, monkeypatch
):
    monkeypatch.setenv("SWEEP_DB_PASSWORD", HOSTILE_PASSWORD)
    with postgres.PostgresServer() as server:
        server.create_user("sweeper", HOSTILE_PASSWORD)
        server.create_database("outage", owner="sweeper")
        storage = STORAGE.format(port=server.port, database="outage")
        path = manifest_with(project, steps=400, pause=0.05, trials=3, concurrent=2, extra=storage, tail=SECRETS)

        def outage(sweep):
            until(lambda: training(home, 2), "both trials training", timeout=120)
            pids = [int(p.read_text()) for p in (home / "runs").glob("demo-*/workdir/outputs/model/pid")]
            server.halt()  # PostgreSQL stops while the trials report to it
            outage.pids = pids

        with nothing_written_outside(tmp_path, home, path.parent):
            lost = interrupt(path, home, outage)
            line = assert_refused(
                lost,
                StorageError,
                f"sweep storage sweeper@127.0.0.1:{server.port}/outage: ",
                "tftrain sweep resume demo-sweep-1",
            )
            assert not any(alive(pid) for pid in outage.pids)  # its trials stopped with it
            server.restart()
            fast(path)
            resumed = cli("sweep", "resume", "demo-sweep-1", "-f", str(path), timeout=300)
            assert_clean(resumed)
    assert "Traceback" not in line and "StorageInternalError" not in lost.stderr
    trials = assert_one_truth(cli, home)
    assert sorted(t["status"] for t in trials) == ["Canceled", "Canceled", "Completed", "Completed", "Completed"]
    assert_no_value_twice(trials)
    for result in (lost, resumed):
        assert not any(form.decode() in result.stdout + result.stderr for form in SECRET_FORMS)
    assert files_containing(home, SECRET_FORMS) == []


def test_a_password_holding_at_colon_slash_hash_works_against_postgres(
    project, cli, home, tmp_path, postgres_server, monkeypatch
):
    postgres_server.create_user("sweeper", HOSTILE_PASSWORD)
    postgres_server.create_database("quoted", owner="sweeper")
    monkeypatch.setenv("SWEEP_DB_PASSWORD", HOSTILE_PASSWORD)
    path = sweep_manifest(
        project,
        steps=2,
        pause=0,
        trials=2,
        concurrent=1,
        extra=STORAGE.format(port=postgres_server.port, database="quoted"),
    )
    path.write_text(path.read_text() + SECRETS)
    with nothing_written_outside(tmp_path, home, path.parent):
        result = cli("run", "-f", str(path), timeout=300)
    assert_clean(result)
    assert [t["status"] for t in show(cli)["trials"]] == ["Completed", "Completed"]
    assert not any(form.decode() in result.stdout + result.stderr for form in SECRET_FORMS)
    assert files_containing(home, SECRET_FORMS) == []
    env = {**os.environ, "SWEEP_DB_PASSWORD": HOSTILE_PASSWORD + "!"}
    wrong = subprocess.run(
        [TFTRAIN, "sweep", "join", "demo-sweep-1", "-f", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_refused(
        wrong,
        StorageError,
        f"sweep storage sweeper@127.0.0.1:{postgres_server.port}/quoted: password authentication failed",
    )
