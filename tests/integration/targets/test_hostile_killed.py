"""Hostile corpus: `tftrain run` killed with SIGKILL (a lost runner, the OOM killer, `kill -9`).

What the training started (a child in its group, a grandchild that called setsid) dies within
seconds with no other tftrain command run: the run's watcher (runner/targets/local/watcher.py)
kills the run's cgroup, or, without a cgroup, the run's processes found by their environment.
"""

from __future__ import annotations

import subprocess

import pytest
from containment import finish, pids_in, run_cgroups, start, wait_dead, watcher_of
from hostile import assert_no_traceback, files_containing, nothing_written_outside
from watching import alive, until, wait_for

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-killed-9f2b7c"
FAMILY = """\
import os, subprocess, time
child = subprocess.Popen(["sleep", "1000"])
escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
open("outputs/pids", "w").write(f"{os.getpid()} {child.pid} {escaped.pid}")
print("ready", os.environ["TOKEN"], flush=True)  # masked in the log and on the console
time.sleep(1000)
"""
MANIFEST = "secrets: [TOKEN]\n"
DEAD_WITHIN = 5.0  # seconds after tftrain's death; the watcher takes milliseconds


def killed_run(project, home, test_cgroup, tmp_path):
    """tftrain run of FAMILY, killed with SIGKILL once the script is ready: (its output, its pids)."""
    with nothing_written_outside(tmp_path, home, tmp_path / "project"):
        process = start(project(script=FAMILY, manifest=MANIFEST), test_cgroup)
        wait_for(home / "runs/demo-1/workdir/logs/0.log", "ready ***", timeout=60)
        assert watcher_of(process.pid)
        process.kill()
        out, err = finish(process, timeout=30)
        pids = pids_in(home / "runs/demo-1/workdir/outputs/pids")
        gone = [pid for pid in pids if wait_dead(pid, DEAD_WITHIN)]
    return process, out, err, pids, gone


def test_sigkill_of_tftrain_kills_the_child_and_the_setsid_grandchild_at_once(
    project, home, test_cgroup, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOKEN", SECRET)
    process, out, err, pids, gone = killed_run(project, home, test_cgroup, tmp_path)
    assert gone == pids, f"alive {DEAD_WITHIN}s after tftrain's SIGKILL: {[pid for pid in pids if alive(pid)]}"
    assert process.returncode == -9
    assert_no_traceback(process_result(process, out, err))
    until(lambda: run_cgroups(test_cgroup) == [], "the watcher removes the run's cgroup", timeout=DEAD_WITHIN)
    assert SECRET not in out + err and not files_containing(home, [SECRET.encode()])


def test_without_a_cgroup_the_watcher_finds_the_run_by_its_environment(
    project, home, test_cgroup, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOKEN", SECRET)
    (test_cgroup.path / "cgroup.max.depth").write_text("1")  # tftrain/ may be made, a run cgroup below it not
    process, out, err, pids, gone = killed_run(project, home, test_cgroup, tmp_path)
    assert gone == pids, f"alive {DEAD_WITHIN}s after tftrain's SIGKILL: {[pid for pid in pids if alive(pid)]}"
    assert "no cgroup for this run" in out + err
    assert_no_traceback(process_result(process, out, err))
    assert SECRET not in out + err and not files_containing(home, [SECRET.encode()])


def process_result(process: subprocess.Popen, out: str, err: str) -> subprocess.CompletedProcess:
    """A killed tftrain's output, as the hostile assertions take it."""
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
