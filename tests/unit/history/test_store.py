"""The run history: run.json is the record, tftrain.db an index rebuilt from the directories."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import history_damage as damage
import pytest

from runner.errors import HistoryError
from runner.history.indexfile import inspect
from runner.history.owner import Owner, process_start
from runner.history.store import Store
from runner.targets.leftovers import reconcile

MANIFEST = json.dumps({"name": "demo", "entry_script": "train.py"})


def finished_run(store: Store, status: str = "Completed") -> str:
    run_id = store.new_run("demo", MANIFEST)
    for phase in ("Preparing", "Running", "PostProcessing"):
        store.start_phase(run_id, phase)
    store.update_run(run_id, git={"commit": "abc"})
    store.finish(
        run_id, status, 0 if status == "Completed" else 10, None if status == "Completed" else "train.py:1: boom"
    )
    return run_id


def record(home: Path, run_id: str) -> dict:
    return json.loads((home / "runs" / run_id / "run.json").read_text())


def test_run_json_is_written_from_the_start_and_kept_up_to_date(tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        run_id = store.new_run("demo", MANIFEST)
        first = record(home, run_id)
        assert (
            first["status"] == "Queued" and first["name"] == "demo" and first["manifest"]["entry_script"] == "train.py"
        )
        assert first["owner"]["pid"] == os.getpid() and first["owner"]["start"] == process_start(os.getpid())
        assert first["owner"]["host"] and first["owner"]["boot"]
        store.start_phase(run_id, "Running")
        assert record(home, run_id)["status"] == "Running"
        assert (home / "runs" / run_id / ".reserve").stat().st_size > 0  # space held for the last writes
        store.finish(run_id, "Failed", 10, "train.py:1: boom")
    final = record(home, run_id)
    assert (final["status"], final["exit_code"], final["message"]) == ("Failed", 10, "train.py:1: boom")
    assert [p["phase"] for p in final["phases"]] == ["Queued", "Running", "Failed"]
    assert all(p["ended"] is not None for p in final["phases"])
    assert not (home / "runs" / run_id / ".reserve").exists()
    with Store(home) as store:
        store.update_run(run_id, model="demo@v1")  # what the pipeline adds at the end
    assert record(home, run_id)["owner"] == final["owner"] and record(home, run_id)["model"] == "demo@v1"


def test_missing_index_is_rebuilt_and_ids_continue(tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        first, second = finished_run(store), finished_run(store, "Failed")
    before = damage.digest(home / "runs" / first)
    (home / "tftrain.db").unlink()
    heard = []
    with Store(home, notify=heard.append) as store:
        assert [run.run_id for run in store.runs()] == [second, first]
        failed = store.run("2")
        assert (failed.run_id, failed.status, failed.exit_code, failed.message) == (
            second,
            "Failed",
            10,
            "train.py:1: boom",
        )
        assert failed.git == {"commit": "abc"} and failed.run_dir == home / "runs" / second
        assert [p.phase for p in store.phases(first)] == [
            "Queued",
            "Preparing",
            "Running",
            "PostProcessing",
            "Completed",
        ]
        third = store.new_run("demo", MANIFEST)
    assert third == "demo-3"
    assert damage.digest(home / "runs" / first) == before
    assert len(heard) == 1 and "was missing: rebuilt it from 2 runs (10 phases) and 0 model versions" in heard[0]


def test_empty_index_file_is_rebuilt_too(tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        finished_run(store)
    (home / "tftrain.db").write_bytes(b"")
    with Store(home) as store:
        assert store.new_run("demo", MANIFEST) == "demo-2"


def test_a_run_directory_is_never_reused(tmp_path):
    home = tmp_path / "home"
    (home / "runs" / "demo-7").mkdir(parents=True)  # left by a history this index never saw
    (home / "runs" / "other-9").mkdir()
    with Store(home) as store:
        assert store.new_run("demo", MANIFEST) == "demo-10"
        assert store.new_run("other", MANIFEST) == "other-11"
    assert list((home / "runs" / "demo-7").iterdir()) == []


DAMAGE = {
    "truncated": (damage.truncated, "malformed"),
    "garbage": (lambda db: db.write_bytes(os.urandom(8192)), "file is not a database"),
    "text": (lambda db: db.write_text("runs: none\n" * 100), "file is not a database"),
    "directory": (damage.directory, "a directory, not a file"),
    "dropped-column": (damage.sql("ALTER TABLE runs DROP COLUMN status"), "table runs has no column status"),
    "dropped-table": (damage.sql("DROP TABLE phases"), "no table phases"),
    "bad-json-git": (damage.sql("UPDATE runs SET git = '{not json'"), "invalid JSON in runs.git of demo-1"),
    "bad-json-manifest": (damage.sql("UPDATE runs SET manifest = '[1, 2]'"), "invalid JSON in runs.manifest of demo-1"),
    "bad-json-info": (
        damage.sql("INSERT INTO models VALUES ('demo', 1, 'ready', 'demo-1', 0, '/x', 'nope')"),
        "invalid JSON in models.info of demo@v1",
    ),
}


def _checkpointed(home: Path) -> Path:
    """The index as one file (no -wal beside it), as damage finds it."""
    with sqlite3.connect(home / "tftrain.db") as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode=DELETE")
    connection.close()
    return home / "tftrain.db"


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_index_is_one_error_naming_the_file_and_doctor(case, tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        run_id = finished_run(store)
    damage, reason = DAMAGE[case]
    damage(_checkpointed(home))
    with pytest.raises(HistoryError) as caught:
        Store(home).runs()
    message = str(caught.value)
    assert str(home / "tftrain.db") in message and reason in message and "`tftrain doctor`" in message
    assert "\n" not in message
    assert inspect(home / "tftrain.db")  # doctor sees it too

    # what doctor does: the damaged file set aside (kept), the index rebuilt with the same ids
    with Store(home, set_aside="damaged") as store:
        assert store.rebuilt is not None and store.rebuilt.runs == 1 and not store.rebuilt.problems
        kept = store.set_aside_as[0]
        assert kept.name.startswith("tftrain.db.damaged-") and kept.exists()
        assert store.run(run_id).status == "Completed" and store.run("1").run_id == run_id
        assert store.new_run("demo", MANIFEST) == "demo-2"
    assert inspect(home / "tftrain.db") == []


def test_rebuild_reports_what_it_could_not(tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        finished_run(store)
    (home / "runs" / "demo-5").mkdir()  # no run.json
    (home / "runs" / "demo-6").mkdir()
    (home / "runs" / "demo-6" / "run.json").write_text("{broken")
    version = home / "models" / "demo" / "v1"
    version.mkdir(parents=True)
    (version / "version.json").write_text(
        json.dumps({"name": "demo", "version": 1, "run_id": "demo-1", "created": 5.0})
    )
    (home / "models" / "demo" / "v2").mkdir()  # a registration that never finished
    with Store(home, set_aside="old") as store:
        problems = "\n".join(store.rebuilt.problems)
        assert store.rebuilt.runs == 1 and store.rebuilt.models == 1
        assert "demo-5: no run.json" in problems and "demo-6: unreadable" in problems and "v2: version.json" in problems
        rows = store.db.execute("SELECT version, state, run_id, created FROM models ORDER BY version").fetchall()
        assert rows == [(1, "ready", "demo-1", 5.0), (2, "pending", None, rows[1][3])]  # v2 stays taken
        assert store.new_run("demo", MANIFEST) == "demo-7"


def test_run_json_from_before_owners_and_manifests_is_indexed(tmp_path):
    """run.json as older versions wrote it (at the end only): the rest comes from the lock file."""
    run_dir = tmp_path / "home" / "runs" / "digits-3"
    run_dir.mkdir(parents=True)
    phases = [
        {"phase": "Queued", "started": 10.0, "ended": 11.0},
        {"phase": "Completed", "started": 20.0, "ended": 20.0},
    ]
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "run_id": "digits-3",
                "status": "Completed",
                "exit_code": 0,
                "message": None,
                "phases": phases,
                "model": None,
                "metrics": {},
                "git": {},
            }
        )
    )
    (run_dir / "manifest.lock.yml").write_text("manifest:\n  name: digits\n  entry_script: train.py\n")
    with Store(tmp_path / "home") as store:
        run = store.run("3")
        assert (run.run_id, run.name, run.created, run.ended, json.loads(run.manifest)["name"]) == (
            "digits-3",
            "digits",
            10.0,
            20.0,
            "digits",
        )


def _owned_by(home: Path, run_id: str, **owner) -> None:
    path = home / "runs" / run_id / "run.json"
    data = json.loads(path.read_text())
    data["owner"].update(owner)
    path.write_text(json.dumps(data))


def test_runs_whose_owner_is_gone_are_marked_failed(tmp_path):
    home = tmp_path / "home"
    with Store(home) as store:
        lost = store.new_run("demo", MANIFEST)
        store.start_phase(lost, "Running")
        mine = store.new_run("demo", MANIFEST)
        elsewhere = store.new_run("demo", MANIFEST)
    _owned_by(home, lost, start=process_start(os.getpid()) - 1)  # the same pid, another process: a reused pid
    _owned_by(home, elsewhere, host="another-host", pid=1)
    heard = []
    with Store(home, notify=heard.append) as store:
        assert store.run(lost).status == "Running" and heard == []  # opening the history judges nothing
        assert reconcile(store) == [lost]
        run = store.run(lost)
        assert (run.status, run.exit_code, run.message) == ("Failed", 1, f"lost: tftrain process {os.getpid()} ended")
        assert store.run(mine).status == "Queued"  # its owner (this process) is alive
        assert store.run(elsewhere).status == "Queued"  # another machine's run is not judged here
        assert [p.phase for p in store.phases(lost)] == ["Queued", "Running", "Failed"]
    assert record(home, lost)["status"] == "Failed" and record(home, lost)["exit_code"] == 1
    assert record(home, lost)["cause"] == "lost" and "cause" not in record(home, mine)  # data, not the message's words
    assert not (home / "runs" / lost / ".reserve").exists()
    assert heard == [f"run {lost} marked Failed (lost: tftrain process {os.getpid()} ended)"]


def test_owner_of_a_rebooted_machine_is_gone():
    me = Owner.me()
    assert not me.gone()
    assert Owner(me.host, me.pid, me.start, "another-boot").gone()
    assert Owner(me.host, 2**22 + 7, None, me.boot).gone()  # above pid_max: no such process


def test_index_replaced_under_an_open_store_is_followed(tmp_path):
    """doctor (or rm) replaced tftrain.db while a run was in progress: the run's writes reach the new one."""
    home = tmp_path / "home"
    store = Store(home)
    run_id = store.new_run("demo", MANIFEST)
    with Store(home, set_aside="old"):
        pass
    store.finish(run_id, "Completed", 0, None)
    store.close()
    with Store(home) as fresh:
        assert fresh.run(run_id).status == "Completed"


def test_models_table_is_rebuilt_from_version_directories(tmp_path):
    home = tmp_path / "home"
    version = home / "models" / "digits" / "v3"
    version.mkdir(parents=True)
    (version / "version.json").write_text(
        json.dumps({"name": "digits", "version": 3, "run_id": "digits-1", "created": 7.0, "files": 2})
    )
    with Store(home) as store:
        (row,) = store.db.execute("SELECT name, version, state, run_id, created, path, info FROM models").fetchall()
        from runner.history.model_registry import Registry

        assert Registry(store).get("digits", 3).path == version
    assert row[:6] == (
        "digits",
        3,
        "ready",
        "digits-1",
        7.0,
        "models/digits/v3",
    )  # relative to the home: a copied home reads its own
    assert json.loads(row[6])["files"] == 2


def test_a_gitignore_made_by_a_concurrent_tftrain_is_no_error(tmp_path, monkeypatch):
    """Two trials of a sweep open one fresh history at once: the one that finds no .gitignore and
    then loses the race to make it goes on (it was `cannot use HOME … (File exists)`)."""
    from runner.history import indexfile

    home = tmp_path / "home"
    real = indexfile.kind_of

    def racing(path):
        found = real(path)
        if path.name == ".gitignore" and found is None:
            path.write_text("*\n")  # the other tftrain, between the look and the create
        return found

    monkeypatch.setattr(indexfile, "kind_of", racing)
    with Store(home) as store:
        assert store.home == home
    assert (home / ".gitignore").read_text() == "*\n"


def test_a_phase_written_later_keeps_the_time_it_began(tmp_path):
    """The pipeline writes Running once the script has started, stamped with when the phase began."""
    home = tmp_path / "home"
    with Store(home) as store:
        run_id = store.new_run("demo", MANIFEST)
        store.start_phase(run_id, "Preparing")
        began = record(home, run_id)["phases"][-1]["started"] + 0.25
        store.start_phase(run_id, "Running", at=began)
    phases = record(home, run_id)["phases"]
    assert phases[-2]["phase"] == "Preparing" and phases[-2]["ended"] == began
    assert phases[-1] == {**phases[-1], "phase": "Running", "started": began, "ended": None}


def test_a_run_queued_again_says_why_until_it_runs(tmp_path):
    """Slurm's PENDING after Preparing: Queued again, with Slurm's reason on the phase and as the
    run's message (`tftrain runs`); a new reason keeps when the wait began; Running clears the message."""
    home = tmp_path / "home"
    with Store(home) as store:
        run_id = store.new_run("demo", MANIFEST)
        store.start_phase(run_id, "Preparing")
        store.start_phase(run_id, "Queued", reason="Slurm job 7: PENDING (Priority)")
        first = record(home, run_id)
        assert first["status"] == "Queued" and first["message"] == "Slurm job 7: PENDING (Priority)"
        assert [(p["phase"], p.get("reason")) for p in first["phases"]] == [
            ("Preparing", None),
            ("Queued", "Slurm job 7: PENDING (Priority)"),
        ]
        store.start_phase(run_id, "Queued", reason="Slurm job 7: PENDING (Resources)")
        again = record(home, run_id)
        assert again["phases"][-1] == {**first["phases"][-1], "reason": "Slurm job 7: PENDING (Resources)"}
        assert again["message"] == "Slurm job 7: PENDING (Resources)" and len(again["phases"]) == 2
        assert [run.message for run in store.runs()] == ["Slurm job 7: PENDING (Resources)"]
        store.start_phase(run_id, "Running")
        running = record(home, run_id)
        assert running["status"] == "Running" and running["message"] is None
        assert (
            running["phases"][-2]["reason"] == "Slurm job 7: PENDING (Resources)"
            and running["phases"][-2]["ended"] is not None
        )
        store.finish(run_id, "Completed", 0, None)
    assert [p["phase"] for p in record(home, run_id)["phases"]] == ["Preparing", "Queued", "Running", "Completed"]


def test_an_index_with_absolute_paths_is_migrated_to_the_home_it_is_in(tmp_path):
    """tftrain.db before paths were relative (user_version 0), copied to another home: its rows
    are re-rooted there; one naming a directory outside any home is refused in one line."""
    import shutil
    import sqlite3

    from runner.errors import HistoryError

    original = tmp_path / "a" / "home"
    with Store(original) as store:
        run_id = store.new_run("demo", MANIFEST)
    with sqlite3.connect(original / "tftrain.db") as db:
        db.execute("UPDATE runs SET run_dir = ? || '/runs/' || run_id", (str(original),))
        db.execute("PRAGMA user_version = 0")
    db.close()
    copy = tmp_path / "b" / "home"
    shutil.copytree(original, copy)
    shutil.rmtree(original)
    with Store(copy) as store:
        assert store.run(run_id).run_dir == copy / "runs" / run_id
        assert store.db.execute("SELECT run_dir FROM runs").fetchall() == [(f"runs/{run_id}",)]
        assert store.db.execute("PRAGMA user_version").fetchone() == (1,)
    with sqlite3.connect(copy / "tftrain.db") as db:
        db.execute("UPDATE runs SET run_dir = '/etc'")
        db.execute("PRAGMA user_version = 0")
    db.close()
    with pytest.raises(HistoryError, match=r"runs.run_dir of demo-1 is '/etc', outside .*: run `tftrain doctor`"):
        Store(copy)
