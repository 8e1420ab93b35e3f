"""Where run cgroups go, what they are called, and how a task is started into one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.targets.containment import run_cgroup_name
from runner.targets.local import processes
from runner.targets.local.cgroup import Cgroup, own_cgroup, runs_parent, unified_mount
from runner.targets.local.processes import ENTER, ENTER_SH, SHELL, _check_executable, entering

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PURE_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_ONLY = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
SERVICE = "0::/system.slice/actions.runner.service\n"


def test_the_cgroup2_mount_of_a_hybrid_and_a_pure_v2_host():
    assert unified_mount(HYBRID) == (Path("/sys/fs/cgroup/unified"), "/")
    assert unified_mount(PURE_V2) == (Path("/sys/fs/cgroup"), "/")
    assert unified_mount(V1_ONLY) is None


def test_a_mount_point_with_a_space_is_unescaped():
    line = r"41 31 0:38 / /mnt/cgroup\040two rw - cgroup2 none rw" + "\n"
    assert unified_mount(line) == (Path("/mnt/cgroup two"), "/")


def test_our_own_cgroup_is_the_0_line():
    assert own_cgroup("4:memory:/x\n1:cpu:/\n" + SERVICE) == "/system.slice/actions.runner.service"
    assert own_cgroup("4:memory:/x\n1:cpu:/\n") is None


def test_runs_go_below_tftrain_next_to_our_cgroup():
    assert runs_parent(HYBRID, "9:name=systemd:/\n0::/\n") == (Path("/sys/fs/cgroup/unified/tftrain"), "")
    assert runs_parent(PURE_V2, SERVICE) == (Path("/sys/fs/cgroup/system.slice/actions.runner.service/tftrain"), "")


def test_a_mount_of_a_subtree_is_followed_and_a_cgroup_outside_it_refused():
    subtree = "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert runs_parent(subtree, "0::/docker/abc/job\n") == (Path("/sys/fs/cgroup/job/tftrain"), "")
    parent, why = runs_parent(subtree, "0::/elsewhere\n")
    assert parent is None and why == "our cgroup /elsewhere is outside the cgroup2 mount at /sys/fs/cgroup"


def test_why_there_is_no_place_for_run_cgroups():
    assert runs_parent(V1_ONLY, SERVICE) == (None, "no cgroup2 file system is mounted")
    no_v2 = "this process has no cgroup v2 path (/proc/self/cgroup has no 0:: line)"
    assert runs_parent(HYBRID, "4:memory:/x\n") == (None, no_v2)


def test_a_run_cgroup_is_named_by_run_id_and_home(tmp_path):
    name = run_cgroup_name("demo-1", tmp_path / "home")
    assert name.startswith("demo-1.") and len(name) == len("demo-1.") + 12
    assert run_cgroup_name("demo-1", tmp_path / "home" / ".." / "home") == name  # the same home, spelled otherwise
    assert run_cgroup_name("demo-1", tmp_path / "other") != name
    assert "/" not in run_cgroup_name("../../x", tmp_path)


def test_a_task_is_started_through_the_enter_step():
    argv = entering(["python", "train.py", "--lr", "0.1"], Cgroup(Path("/cg/tftrain/demo-1.x")), 4242)
    assert argv[:3] == [SHELL, "-c", ENTER_SH]
    assert argv[4:9] == ["/cg/tftrain/demo-1.x/cgroup.procs", "4242", sys.executable, ENTER, "python"]
    assert argv[9:] == ["train.py", "--lr", "0.1"]
    assert entering(["python"], None, 7)[4:] == [
        "",
        "7",
        sys.executable,
        ENTER,
        "python",
    ]  # no cgroup: the parent-death signal only
    compile(ENTER, "<enter>", "exec")


def test_without_a_shell_the_enter_step_is_python(monkeypatch):
    monkeypatch.setattr(processes, "SHELL", "/nonexistent/sh")
    argv = entering(["python", "train.py"], Cgroup(Path("/cg/tftrain/demo-1.x")), 4242)
    assert argv[:5] == [sys.executable, "-I", "-S", "-c", ENTER]
    assert argv[5:] == ["/cg/tftrain/demo-1.x/cgroup.procs", "4242", "python", "train.py"]


def test_a_program_that_cannot_start_is_refused_before_the_fork(tmp_path):
    (tmp_path / "data.txt").write_text("")
    with pytest.raises(FileNotFoundError):
        _check_executable("no-such-program-anywhere", tmp_path, {"PATH": "/usr/bin:/bin"})
    with pytest.raises(FileNotFoundError):
        _check_executable("./missing.sh", tmp_path, {})
    with pytest.raises(PermissionError):
        _check_executable("./data.txt", tmp_path, {})
    _check_executable("sh", tmp_path, {"PATH": "/usr/bin:/bin"})
