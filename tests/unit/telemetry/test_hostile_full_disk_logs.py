"""Hostile corpus, pure: a log that cannot be written (/dev/full) under the pump and a build step.

The console never says skipped lines are in a log that stopped; the run's error names the file
that ran out of space first; a build step's log that fills up never leaves its process unread."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_logpump import BlockedStream, Capture, _write_all

from runner.errors import DiskFullError
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LogPump, first_disk_full
from runner.telemetry.tee import Tee


def test_skipped_lines_of_a_log_that_stopped_are_said_lost_never_in_the_log(tmp_path):
    (tmp_path / "0.log").symlink_to("/dev/full")
    stream = BlockedStream()
    logger = Logger(stream, max_queued=64 << 10)
    pump = LogPump(logger, tmp_path, prefix_ranks=False)
    read_fd, write_fd = os.pipe()
    pump.add(0, read_fd)
    writer = threading.Thread(target=_write_all, args=(write_fd, b"".join(b"line %07d\n" % i for i in range(200_000))))
    writer.start()
    writer.join(timeout=60)
    assert not writer.is_alive(), "the training blocked on a pump that stopped draining"
    pump.join()
    stream.release.set()
    logger.flush()
    shown = stream.getvalue()
    assert "all are in" not in shown
    assert f"lines not shown (console too slow); lost: {tmp_path / '0.log'} holds no line (disk full)" in shown
    assert shown.count("disk full writing") == 1 and "(the log holds no line)" in shown


def sink(path: str | None, at: float | None) -> SimpleNamespace:
    return SimpleNamespace(disk_full=Path(path) if path else None, failed_at=at)


def test_the_run_names_the_file_that_ran_out_of_space_first():
    log, metrics, fine = (
        sink("/h/runs/r-1/workdir/logs/0.log", 5.0),
        sink("/h/runs/r-1/metrics.jsonl", 3.0),
        sink(None, None),
    )
    error = first_disk_full((log, metrics, fine), "completed")
    assert isinstance(error, DiskFullError) and error.exit_code == 22
    assert str(error).startswith("disk full writing /h/runs/r-1/metrics.jsonl (the training completed;")
    assert "0.log" in str(first_disk_full((log, sink("/h/runs/r-1/metrics.jsonl", 9.0)), "failed"))
    assert first_disk_full((log, metrics), "was stopped", before=2.0) is None  # run.json failed before either
    assert first_disk_full((fine,), "completed") is None


def test_a_build_log_that_fills_up_ends_the_step_then_names_the_log(tmp_path):
    log = tmp_path / "prepare.log"
    log.symlink_to("/dev/full")
    stream = Capture()
    logger = Logger(stream)
    with pytest.raises(DiskFullError, match=f"^disk full writing {log}$"):
        with Tee(log, logger, "$ pip install\n") as tee:
            for index in range(3000):  # past the file's buffer: writes fail in the middle
                tee.write(f"Collecting package-{index}\n")
            assert len(tee.tail) == 40  # the step still reads all of it
    logger.flush()
    shown = stream.buffer.getvalue().decode()
    assert shown.count("disk full writing") == 1 and "Collecting package-2999" in shown


def test_a_failing_step_keeps_its_own_error_over_the_full_log(tmp_path):
    log = tmp_path / "prepare.log"
    log.symlink_to("/dev/full")
    with pytest.raises(RuntimeError, match="pip crashed"):
        with Tee(log, Logger(Capture()), "$ pip install\n") as tee:
            tee.write("x" * 20000 + "\n")
            raise RuntimeError("pip crashed")
