"""Sweeps through the real CLI: trials as runs, live early termination, the best model registered,
Ctrl-C and resume, a metric never reported, --no-sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import postgres
import pytest
from conftest import TFTRAIN
from sweeping import show, show_in, sweep_manifest
from watching import alive, until

postgres_server = postgres.postgres_server  # a real server for the session (tests/postgres.py)
postgres_url = postgres.postgres_url


def test_a_sweep_runs_its_trials_as_runs_and_registers_the_best(project, cli, home):
    result = cli("run", "-f", str(sweep_manifest(project)))
    assert result.returncode == 0, result.stderr
    document = show(cli)
    assert set(document) == {"id", "status", "objective", "trials", "best"}
    assert document["id"] == "demo-sweep-1" and document["status"] == "Completed"
    assert document["objective"] == {"primary_metric": "score", "goal": "maximize"}
    trials = document["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2, 3] and {t["status"] for t in trials} == {"Completed"}
    for trial in trials:
        assert set(trial) == {"number", "run_id", "status", "early_terminated", "params", "value"}
        assert set(trial["params"]) == {"--lr", "--bs"}
        expected = trial["params"]["--lr"] * 10 - trial["params"]["--bs"] / 1000 + 6 / 100
        assert trial["value"] == pytest.approx(expected, abs=1e-5)  # the last value of the primary metric
        record = json.loads((home / "runs" / trial["run_id"] / "run.json").read_text())
        assert record["sweep"] == {"id": "demo-sweep-1", "trial": trial["number"]}
    best = max(trials, key=lambda t: t["value"])
    assert document["best"] == {
        "number": best["number"],
        "run_id": best["run_id"],
        "value": best["value"],
        "model_version": "demo@v1",
    }
    info = json.loads((home / "models" / "demo" / "v1" / "version.json").read_text())
    assert info["sweep"]["params"] == best["params"] and info["run_id"] == best["run_id"]
    assert not (home / "models" / "demo" / "v2").exists()  # only the best trial's model is a version
    assert "demo-sweep-1" in cli("sweeps").stdout


def test_the_policy_stops_a_losing_trial_within_seconds(project, cli, home):
    # grid: both trials at once; the loser's value is 1.9 below the winner's at every step, the slack 0.5;
    # it is the slower one, so the winner has reported each interval when the loser reaches it
    extra = "  early_termination: {type: bandit, slack_amount: 0.5, evaluation_interval: 1, delay_evaluation: 1}\n"
    path = sweep_manifest(project, steps=40, pause=0.1, sampling="grid", trials=2, concurrent=2, extra=extra)
    text = path.read_text().replace("[0.01, 0.05, 0.1, 0.2]", "[0.2, 0.01]").replace("[16, 64]", "[16]")
    text = text.replace("  --pause: 0.1\n", "  --pause: 0.1\n  --slow-below: 0.1\n")
    path.write_text(text)
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    trials = {t["params"]["--lr"]: t for t in show(cli)["trials"]}
    assert trials[0.2]["status"] == "Completed" and not trials[0.2]["early_terminated"]
    loser = trials[0.01]
    assert loser["status"] == "Canceled" and loser["early_terminated"] is True
    record = json.loads((home / "runs" / loser["run_id"] / "run.json").read_text())
    assert record["status"] == "Canceled" and record["message"].startswith("early termination at step ")
    outputs = home / "runs" / loser["run_id"] / "workdir" / "outputs"
    assert int((outputs / "model" / "step").read_text()) < 20  # stopped at once, not after its 40 steps
    pid = int((outputs / "model" / "pid").read_text())
    assert not alive(pid)


def test_an_objective_no_trial_reports_is_named_when_the_first_trial_ends(project, cli, home):
    result = cli("run", "-f", str(sweep_manifest(project, metric="val_accuracy", concurrent=1)))
    assert result.returncode == 25
    assert (
        "sweep.objective.primary_metric: trial 0 (run demo-1) completed without reporting 'val_accuracy'; it reported:"
        " score" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert len(show(cli)["trials"]) == 1  # no further trial was started


def test_no_sweep_runs_the_defaults_once(project, cli, home):
    result = cli("run", "--no-sweep", "-f", str(sweep_manifest(project)))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (home / "runs").iterdir()) == ["demo-1"]
    # the defaults: --lr 0.1 --bs 32
    assert "step 6 score: 1.02800" in (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert not (home / "sweeps").exists()


def test_ctrl_c_stops_every_trial_and_resume_goes_on_from_their_checkpoints(project, cli, home):
    path = sweep_manifest(project, steps=200, pause=0.05, trials=2, concurrent=2)
    sweep = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        until(lambda: len(list((home / "runs").glob("demo-*/workdir/outputs/model/step"))) == 2, "both trials training")
        pids = [int(p.read_text()) for p in (home / "runs").glob("demo-*/workdir/outputs/model/pid")]
        sweep.send_signal(signal.SIGINT)
        out, err = sweep.communicate(timeout=60)
    finally:
        sweep.kill()
    assert sweep.returncode == 12, err
    assert "tftrain sweep resume demo-sweep-1" in err
    assert not any(alive(pid) for pid in pids)
    document = show(cli)
    assert document["status"] == "Canceled" and {t["status"] for t in document["trials"]} == {"Canceled"}
    path.write_text(path.read_text().replace("--pause: 0.05", "--pause: 0"))  # the rest of the 200 steps, fast
    resumed = cli("sweep", "resume", "demo-sweep-1", "-f", str(path))
    assert resumed.returncode == 0, resumed.stderr
    document = show(cli, "demo-sweep-1")
    assert document["status"] == "Completed"
    redone = [t for t in document["trials"] if t["status"] == "Completed"]
    assert len(redone) == 2 and {t["run_id"] for t in redone}.isdisjoint(t["run_id"] for t in document["trials"][:2])
    for trial in redone:
        log = (home / "runs" / trial["run_id"] / "workdir" / "logs" / "0.log").read_text()
        assert "resumed at step" in log


def test_two_runners_share_one_study_on_postgres(project, home, tmp_path, postgres_url):
    """The starter creates the sweep; a second runner (its own TFTRAIN_HOME, as on another machine)
    joins it; together they run max_total_trials trials, the password coming from the environment."""
    user, _, rest = postgres_url.partition("://")[2].partition(":")
    password, _, where = rest.partition("@")
    storage = f"postgresql://{user}:${{SWEEP_DB_PASSWORD}}@{where}"
    path = sweep_manifest(project, steps=4, pause=0.2, trials=6, concurrent=1, extra=f"  storage: {storage}\n")
    path.write_text(path.read_text() + "secrets: [SWEEP_DB_PASSWORD]\n")
    env = {**os.environ, "COLUMNS": "200", "SWEEP_DB_PASSWORD": password}
    other = tmp_path / "other-home"
    starter = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        until((home / "sweeps" / "demo-sweep-1" / "sweep.json").exists, "the sweep created")
        joined = subprocess.run(
            [TFTRAIN, "sweep", "join", "demo-sweep-1", "-f", str(path)],
            env={**env, "TFTRAIN_HOME": str(other)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        out, err = starter.communicate(timeout=300)
    finally:
        starter.kill()
    assert starter.returncode == 0, err
    assert joined.returncode == 0, joined.stderr
    assert password not in err + out + joined.stderr + joined.stdout
    mine = {t["run_id"] for t in show_in(home)["trials"] if (home / "runs" / t["run_id"]).exists()}
    theirs = {t["run_id"] for t in show_in(other)["trials"] if (other / "runs" / t["run_id"]).exists()}
    assert mine and theirs  # both runners ran trials
    numbers = [t["number"] for t in show_in(other)["trials"]]
    # a joiner may start one more than the limit at the very end
    assert len(numbers) == len(set(numbers)) and 6 <= len(numbers) <= 7


def test_an_unreachable_storage_is_one_line_without_the_password(project, cli, home):
    extra = "  storage: postgresql://tftrain:hunter2secret@127.0.0.1:1/sweeps?connect_timeout=2\n"
    result = cli("run", "-f", str(sweep_manifest(project, extra=extra)))
    assert result.returncode == 18
    assert "hunter2secret" not in result.stderr + result.stdout
    assert result.stderr.count("\n") == 1 and "127.0.0.1:1/sweeps" in result.stderr, result.stderr


def test_more_concurrent_trials_than_the_machine_can_place_is_refused_before_any_runs(project, cli, home):
    path = sweep_manifest(project, concurrent=3)
    path.write_text(path.read_text() + "compute:\n  slots_per_node: 2\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 7
    assert (
        "sweep.limits.max_concurrent_trials: 3 trials of 1 process need 3 slots; compute.slots_per_node is 2"
        in result.stderr
    )
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


def test_warm_start_gives_the_new_study_the_earlier_trials_but_not_its_table(project, cli, home):
    path = sweep_manifest(project, trials=2)
    assert cli("run", "-f", str(path)).returncode == 0
    earlier = show(cli, "demo-sweep-1")["trials"]
    path.write_text(path.read_text() + "  warm_start: [demo-sweep-1]\n")
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    document = show(cli, "demo-sweep-2")
    assert [t["number"] for t in document["trials"]] == [
        2,
        3,
    ]  # numbers 0 and 1 are the earlier sweep's, known to the sampler
    import optuna

    study = optuna.load_study(study_name="demo-sweep-2", storage=f"sqlite:///{home / 'sweeps.db'}")
    warm = [t for t in study.trials if "warm_start_from" in t.user_attrs]
    assert sorted((t.user_attrs["values"]["--lr"], t.value) for t in warm) == sorted(
        (t["params"]["--lr"], t["value"]) for t in earlier
    )
    assert document["best"]["run_id"] in {t["run_id"] for t in document["trials"]}  # never an earlier sweep's trial


def test_in_actions_each_trial_is_a_group_and_the_table_is_the_job_summary(project, home, tmp_path):
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
        "COLUMNS": "200",
    }
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("::group::trial ") == 2 and "::endgroup::" in result.stdout
    text = summary.read_text()
    assert "## Sweep demo-sweep-1: Completed" in text and "| trial | run | status | score | params |" in text
    assert "```mermaid" in text and "xychart-beta" in text
    assert "sweep-id<<" in outputs.read_text() and "model-version<<" in outputs.read_text()


def test_the_pull_request_comment_shows_the_trials_of_the_best_trials_sweep(project, home, tmp_path, github_api):
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "number": 7,
                "pull_request": {"number": 7, "labels": [], "head": {"ref": "f", "repo": {"full_name": "octo/models"}}},
            }
        )
    )
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "INPUT_GITHUB_TOKEN": "ghs_test",
        "GITHUB_OUTPUT": str(tmp_path / "outputs.txt"),
    }
    run = subprocess.run(
        [TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    best = show(lambda *args: subprocess.run([TFTRAIN, *args], capture_output=True, text=True))["best"]
    comment = subprocess.run(
        [TFTRAIN, "github", "comment", "--run", best["run_id"]], env=env, capture_output=True, text=True, timeout=120
    )
    assert comment.returncode == 0, comment.stderr
    (posted,) = github_api.comments.values()
    assert "## Sweep demo-sweep-1: Completed" in posted["body"] and f"Best: trial {best['number']}" in posted["body"]
    assert f"{best['run_id']}: Completed" in posted["body"]  # the best run's own summary follows


def test_publishing_the_best_trial_adds_the_sweeps_plot(project, home, github_api):
    env = {
        **os.environ,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    assert (
        subprocess.run(
            [TFTRAIN, "run", "-f", str(sweep_manifest(project, trials=2))], env=env, capture_output=True, timeout=300
        ).returncode
        == 0
    )
    best = show(lambda *args: subprocess.run([TFTRAIN, *args], capture_output=True, text=True))["best"]
    published = subprocess.run(
        [TFTRAIN, "publish", "--run", best["run_id"]], env=env, capture_output=True, text=True, timeout=300
    )
    assert published.returncode == 0, published.stderr
    (release,) = github_api.releases
    names = {asset["name"] for asset in release["assets"]}
    assert "sweep-trials.png" in names and "model.tar.gz" in names
    png = next(a for a in release["assets"] if a["name"] == "sweep-trials.png")
    assert github_api.assets[png["id"]][1][:8] == b"\x89PNG\r\n\x1a\n"


def test_on_a_terminal_the_trials_table_is_redrawn_in_place(project, home):
    import pty

    main, child = pty.openpty()
    path = sweep_manifest(project, steps=30, pause=0.1, trials=2, concurrent=2)
    with subprocess.Popen(
        [TFTRAIN, "run", "-f", str(path)], stdin=child, stdout=child, stderr=child, env={**os.environ, "COLUMNS": "160"}
    ) as process:
        os.close(child)
        output = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other end closed: tftrain ended
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=120) == 0, output.decode(errors="replace")[-3000:]
    os.close(main)
    text = output.decode(errors="replace")
    assert "of 2 trials ended" in text and "\x1b[J" in text  # drawn, then drawn again over itself
    assert "trial 0 started" not in text  # no line per trial on a terminal: the table says it
    assert "sweep demo-sweep-1: Completed" in text


def test_a_trial_out_of_time_is_canceled_and_the_sweep_goes_on(project, cli, home):
    path = sweep_manifest(project, steps=600, pause=0.05, trials=2, concurrent=1)
    path.write_text(
        path.read_text().replace("max_concurrent_trials: 1}", "max_concurrent_trials: 1, trial_timeout: 2}")
    )
    result = cli("run", "-f", str(path))
    assert result.returncode == 25  # no trial completed
    trials = show(cli)["trials"]
    assert [t["status"] for t in trials] == ["Canceled", "Canceled"] and not any(t["early_terminated"] for t in trials)
    record = json.loads((home / "runs" / trials[0]["run_id"] / "run.json").read_text())
    assert record["status"] == "TimedOut" and "max_run_duration_seconds (2s) reached" in record["message"]


def test_a_matrix_of_jobs_joining_one_id_creates_the_sweep_once(project, tmp_path, postgres_server):
    """Every job of a GitHub matrix runs `tftrain sweep join NAME-sweep-$GITHUB_RUN_ID`: the first
    creates the study, the others join it, and together they run max_total_trials trials."""
    postgres_server.create_database("matrix")  # a study of its own, apart from the other tests'
    path = sweep_manifest(
        project,
        steps=3,
        pause=0.1,
        trials=4,
        concurrent=1,
        extra=f"  storage: {postgres_server.url(database='matrix')}\n",
    )
    homes = [tmp_path / f"runner-{n}" for n in range(3)]
    jobs = [
        subprocess.Popen(
            [TFTRAIN, "sweep", "join", "demo-sweep-12345678901", "-f", str(path)],
            env={**os.environ, "TFTRAIN_HOME": str(home)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for home in homes
    ]
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
    import optuna

    # each runner's sweep.json is its view when it ended; the study holds the whole sweep
    study = optuna.load_study(
        study_name="demo-sweep-12345678901",
        storage=postgres_server.url(database="matrix").replace("postgresql://", "postgresql+psycopg://"),
    )
    assert 4 <= len(study.trials) <= 6 and {t.state.name for t in study.trials} == {"COMPLETE"}


def test_sweep_ids_are_checked_and_resume_never_creates(project, cli, home):
    path = sweep_manifest(project)
    refused = cli("sweep", "join", "not a sweep", "-f", str(path))
    assert refused.returncode == 2 and "SWEEP_ID 'not a sweep': a sweep id is NAME-sweep-N" in refused.stderr
    missing = cli("sweep", "resume", "demo-sweep-7", "-f", str(path))
    assert (
        missing.returncode == 25
        and "sweep demo-sweep-7: no such sweep in this TFTRAIN_HOME's sweeps.db" in missing.stderr
    )


def test_a_killed_sweep_resumes_its_abandoned_trials(project, cli, home):
    path = sweep_manifest(project, steps=200, pause=0.05, trials=2, concurrent=2)
    sweep = subprocess.Popen([TFTRAIN, "run", "-f", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: len(list((home / "runs").glob("demo-*/workdir/outputs/model/step"))) == 2, "both trials training")
        sweep.kill()  # SIGKILL: no handler runs; the trials die with it, the study says Running
        sweep.wait(timeout=30)
    finally:
        sweep.kill()
    path.write_text(path.read_text().replace("--pause: 0.05", "--pause: 0"))
    resumed = cli("sweep", "resume", "demo-sweep-1", "-f", str(path))
    assert resumed.returncode == 0, resumed.stderr
    trials = show(cli, "demo-sweep-1")["trials"]
    # as `tftrain runs` says of them: their tftrain was lost (one truth for a trial's state)
    assert [t["status"] for t in trials] == ["Failed", "Failed", "Completed", "Completed"]
    for trial in trials[2:]:
        assert "resumed at step" in (home / "runs" / trial["run_id"] / "workdir" / "logs" / "0.log").read_text()


def test_a_storage_that_goes_away_under_a_sweep_ends_it_in_one_line(project, home):
    with postgres.PostgresServer() as server:
        path = sweep_manifest(
            project, steps=400, pause=0.05, trials=4, concurrent=2, extra=f"  storage: {server.url()}\n"
        )
        sweep = subprocess.Popen(
            [TFTRAIN, "run", "-f", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            until(
                lambda: len(list((home / "runs").glob("demo-*/workdir/outputs/model/step"))) == 2,
                "both trials training",
            )
            pids = [int(p.read_text()) for p in (home / "runs").glob("demo-*/workdir/outputs/model/pid")]
            server.stop()  # the database is gone while trials report to it
            out, err = sweep.communicate(timeout=120)
        finally:
            sweep.kill()
        password = server.password
    assert sweep.returncode == 18, err  # StorageError: the storage, not the sweep
    assert len(err.strip().splitlines()) == 1 and err.startswith(
        f"tftrain: error: sweep storage tftrain@127.0.0.1:{server.port}/sweeps: "
    )
    assert "Traceback" not in err and "tftrain sweep resume demo-sweep-1" in err
    assert password not in out + err
    assert not any(alive(pid) for pid in pids)  # its trials stopped with it
