"""Commands that only read the history (runs, logs, metrics) leave a home with no history as it was:
nothing is made on disk, the history reads as empty."""

from __future__ import annotations

import pytest

from runner.errors import NotFoundError
from runner.history.store import Store


def test_reading_a_home_that_does_not_exist_makes_nothing(tmp_path):
    home = tmp_path / "home"
    with Store(home, reading=True) as store:
        assert store.runs() == []
        with pytest.raises(NotFoundError):
            store.run("latest")
    assert not home.exists()


def test_reading_an_empty_home_directory_writes_nothing_into_it(tmp_path):
    with Store(tmp_path, reading=True) as store:
        assert store.runs() == []
    assert list(tmp_path.iterdir()) == []


def test_a_home_with_runs_but_no_index_is_rebuilt_even_when_reading(tmp_path):
    with Store(tmp_path) as store:
        run_id = store.new_run("demo", '{"name": "demo", "entry_script": "train.py"}')
    (tmp_path / "tftrain.db").unlink()
    with Store(tmp_path, reading=True) as store:
        assert [run.run_id for run in store.runs()] == [run_id]


def test_runs_on_a_fresh_machine_lists_none_and_makes_no_home(tmp_path, monkeypatch, cli):
    home = tmp_path / "nowhere"
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    for command in (["runs"], ["metrics", "--help"]):
        assert cli(*command).returncode == 0
    assert "no runs yet" in cli("runs").stdout
    assert not home.exists()
