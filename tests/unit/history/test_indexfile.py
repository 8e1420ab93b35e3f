"""The index's files told apart without opening them (runner/history/indexfile.py), and records read
only when they are regular files (runner/history/regular.py): nothing here may block."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from runner.errors import HistoryError
from runner.history.indexfile import inspect, locked, odd, odd_files
from runner.history.regular import read_regular

SECONDS = 10


def within_seconds(work):
    """work() in a thread held to SECONDS: a FIFO opened by mistake fails the test instead of hanging it."""
    done: dict = {}

    def run() -> None:
        try:
            done["value"] = work()
        except Exception as exc:  # handed to the test
            done["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(SECONDS)
    assert not thread.is_alive(), f"still blocked after {SECONDS} s"
    if "error" in done:
        raise done["error"]
    return done.get("value")


def test_what_sqlite_may_open(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    assert odd(tmp_path / "missing") is None and odd(tmp_path / "file") is None and odd(tmp_path / "link") is None


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (os.mkfifo, "a FIFO, not a file"),
        (os.mkdir, "a directory, not a file"),
        (lambda path: path.symlink_to("/dev/urandom"), "a symlink to a character device ('/dev/urandom'), not a file"),
        (lambda path: path.symlink_to("nowhere/x.db"), "a symlink to nothing ('nowhere/x.db'), not a file"),
        (lambda path: path.symlink_to(path), "a symlink that cannot be followed"),
    ],
)
def test_what_it_may_not(tmp_path, make, says):
    make(tmp_path / "tftrain.db")
    assert says in odd(tmp_path / "tftrain.db")
    assert odd_files(tmp_path / "tftrain.db") == [(tmp_path / "tftrain.db", odd(tmp_path / "tftrain.db"))]
    assert says in within_seconds(lambda: inspect(tmp_path / "tftrain.db"))[0]


def test_inspect_names_an_odd_journal_or_lock(tmp_path):
    os.mkfifo(tmp_path / "tftrain.db-wal")
    (tmp_path / "history.lock").symlink_to("/dev/null")
    assert within_seconds(lambda: inspect(tmp_path / "tftrain.db")) == [
        "tftrain.db-wal is a FIFO, not a file",
        "history.lock is a symlink to a character device ('/dev/null'), not a file",
    ]


def test_a_fifo_lock_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "history.lock")

    def take() -> None:
        with locked(tmp_path / "history.lock"):
            pass

    with pytest.raises(HistoryError, match=r"history.lock is damaged \(a FIFO, not a file\): run `tftrain doctor`"):
        within_seconds(take)


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir, lambda path: path.symlink_to("/dev/urandom")])
def test_a_record_that_is_not_a_regular_file_is_never_read(tmp_path, make):
    make(tmp_path / "run.json")
    with pytest.raises(OSError, match="not a regular file"):
        within_seconds(lambda: read_regular(tmp_path / "run.json"))


def test_a_record_behind_a_link_to_a_file_is_read(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "run.json").symlink_to(tmp_path / "real.json")
    assert read_regular(tmp_path / "run.json") == b"{}"
    with pytest.raises(FileNotFoundError):
        read_regular(Path(tmp_path / "missing.json"))
