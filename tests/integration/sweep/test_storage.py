"""The sweep's study storage for real: worker processes sharing one Optuna study through a
PostgreSQL server (tests/postgres.py) and through the default SQLite file, and the one-line
StorageError for a server that cannot be reached or refuses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import postgres
import pytest
from conftest import REPO

from runner.errors import StorageError
from runner.sweep.storage import CONNECT_SECONDS, storage_for

postgres_server = postgres.postgres_server  # the session's server, shared with postgres_url
postgres_url = postgres.postgres_url

# One worker: joins (or creates) the study and runs its share of trials, `jobs` of them at a time
# in threads; each trial reports a few intermediate values, as a sweep's trials do.
WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import optuna
    from runner.sweep.storage import storage_for

    url, home, jobs = sys.argv[1] or None, Path(sys.argv[2]), int(sys.argv[3])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="shared", storage=storage_for(url, home), load_if_exists=True)

    def objective(trial):
        x = trial.suggest_float("x", -1, 1)
        for step in range(1, 4):
            trial.report((x - 0.5) ** 2 + 1 / step, step)
            time.sleep(0.01)
        return (x - 0.5) ** 2

    study.optimize(objective, n_trials=5, n_jobs=jobs)
    """)


def run_workers(url: str | None, home: Path, processes: int = 2, jobs: int = 1) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", WORKER, url or "", str(home), str(jobs)]
    workers = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        assert "database is locked" not in err


def assert_ten_trials(storage) -> None:
    study = optuna.load_study(study_name="shared", storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert [trial.state for trial in trials] == [optuna.trial.TrialState.COMPLETE] * 10
    assert sorted(trial.number for trial in trials) == list(range(10))
    assert all(len(trial.intermediate_values) == 3 for trial in trials)


def test_two_processes_share_a_study_on_postgres(postgres_server, tmp_path):
    # a database of its own: the study name is the same in every test
    postgres_server.create_database("shared_pg")
    url = postgres_server.url(database="shared_pg")
    run_workers(url, tmp_path / "unused-home")
    assert_ten_trials(storage_for(url, tmp_path))
    assert not (tmp_path / "unused-home").exists()


def test_postgresql_psycopg_url_is_taken_as_is(postgres_url, tmp_path):
    url = postgres_url.replace("postgresql://", "postgresql+psycopg://")
    assert storage_for(url, tmp_path).url == url


def test_processes_and_threads_share_the_default_sqlite_study(tmp_path):
    home = tmp_path / "home"
    run_workers(None, home, processes=2, jobs=2)
    assert_ten_trials(storage_for(None, home))
    assert (home / "sweeps.db").is_file()


def assert_one_masked_line(exc: StorageError, password: str, where: str) -> None:
    message = str(exc)
    assert exc.exit_code == 18
    assert "\n" not in message and password not in message
    assert message.startswith(f"sweep storage {where}: ")
    assert exc.__cause__ is None and exc.__suppress_context__  # no chained traceback


def test_an_unreachable_port_is_one_storage_error_line(postgres_server, tmp_path):
    port = postgres.free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        storage_for(postgres_server.url(port=port), tmp_path)
    assert time.monotonic() - started < CONNECT_SECONDS
    assert_one_masked_line(caught.value, postgres_server.password, f"tftrain@127.0.0.1:{port}/sweeps")
    assert "refused" in str(caught.value).lower()


def test_a_silent_server_is_given_up_after_the_connect_timeout(postgres_server, tmp_path):
    # a listener that never answers: the connection opens, the server's greeting never comes
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(StorageError) as caught:
            storage_for(postgres_server.url(port=port) + "?connect_timeout=2", tmp_path)
        assert time.monotonic() - started < 8
    assert_one_masked_line(caught.value, postgres_server.password, f"tftrain@127.0.0.1:{port}/sweeps")
    assert "timeout" in str(caught.value).lower()


def test_a_wrong_password_is_one_storage_error_line(postgres_server, tmp_path):
    with pytest.raises(StorageError) as caught:
        storage_for(postgres_server.url(password="not-the-password"), tmp_path)
    assert_one_masked_line(caught.value, "not-the-password", f"tftrain@127.0.0.1:{postgres_server.port}/sweeps")
    assert "password authentication failed" in str(caught.value)


def test_a_missing_database_is_one_storage_error_line(postgres_server, tmp_path):
    with pytest.raises(StorageError) as caught:
        storage_for(postgres_server.url(database="nowhere"), tmp_path)
    assert_one_masked_line(caught.value, postgres_server.password, f"tftrain@127.0.0.1:{postgres_server.port}/nowhere")
    assert 'database "nowhere" does not exist' in str(caught.value)


def test_an_unsupported_scheme_is_a_storage_error(tmp_path):
    with pytest.raises(StorageError, match="unsupported scheme 'mysql'") as caught:
        storage_for("mysql://root:hunter22@db/sweeps", tmp_path)
    assert "hunter22" not in str(caught.value)
