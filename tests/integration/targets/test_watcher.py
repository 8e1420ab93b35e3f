"""The watcher on its own: what it does when the pipe from tftrain closes, and when it is dismissed."""

from __future__ import annotations

import os
import subprocess

import pytest
from containment import wait_dead
from watching import alive

from runner.targets.local.watcher import Watcher

pytestmark = pytest.mark.integration


@pytest.fixture
def sleeper():
    process = subprocess.Popen(["sleep", "1000"])
    yield process
    process.kill()
    process.wait()


def started(cgroup: str | None, marker: str) -> Watcher:
    watcher, why = Watcher.start(cgroup, marker)
    assert watcher is not None, why
    return watcher


def test_before_cgroup_kill_existed_each_process_of_the_cgroup_is_killed(tmp_path, sleeper):
    """Linux < 5.14 has no cgroup.kill: a directory with cgroup.procs alone stands in for such a cgroup."""
    (tmp_path / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    watcher = started(str(tmp_path), "")
    try:
        os.close(watcher.write_fd)  # as the kernel does when tftrain dies
        watcher.write_fd = -1
        assert wait_dead(sleeper.pid, 5), "the cgroup's process outlived tftrain"
    finally:
        watcher.process.kill()  # it waits for the stand-in to be removable, which it never is
        watcher.process.wait()


def test_without_a_cgroup_only_processes_with_the_run_marker_are_killed(tmp_path, sleeper):
    marker = f"TFTRAIN_OUTPUTS_DIR={tmp_path}/runs/demo-1/workdir/outputs"
    marked = subprocess.Popen(["sleep", "1000"], env={**os.environ, "TFTRAIN_OUTPUTS_DIR": marker.split("=", 1)[1]})
    other = subprocess.Popen(
        ["sleep", "1000"], env={**os.environ, "TFTRAIN_OUTPUTS_DIR": marker.split("=", 1)[1] + "x"}
    )
    try:
        watcher = started(None, marker)
        os.close(watcher.write_fd)
        watcher.write_fd = -1
        assert watcher.process.wait(timeout=60) == 0
        assert marked.wait(timeout=5) == -9
        assert alive(other.pid) and alive(sleeper.pid)
    finally:
        for process in (marked, other):
            process.kill()
            process.wait()


def test_dismissed_it_exits_and_kills_nothing(tmp_path, sleeper):
    (tmp_path / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    watcher = started(str(tmp_path), "")
    watcher.dismiss()
    assert watcher.process.returncode == 0 and alive(sleeper.pid)
    watcher.dismiss()  # twice: nothing more


def test_a_marker_with_a_newline_sweeps_nothing(tmp_path):
    probe = f"TFTRAIN_WATCHER_PROBE={tmp_path}"  # what grep would match, were the line after the newline a pattern
    process = subprocess.Popen(["sleep", "1000"], env={**os.environ, "TFTRAIN_WATCHER_PROBE": str(tmp_path)})
    try:
        watcher = started(None, f"TFTRAIN_OUTPUTS_DIR=/x\n{probe}")
        os.close(watcher.write_fd)
        watcher.write_fd = -1
        assert watcher.process.wait(timeout=60) == 0 and alive(process.pid)
    finally:
        process.kill()
        process.wait()
