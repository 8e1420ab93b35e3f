"""The step between tftrain's fork and the training's exec, run for real: the task joins the run's
cgroup, gets SIGKILL as its parent-death signal, and never starts once tftrain is gone — through
the shell and setpriv, and through the Python fallback where setpriv cannot be found."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner.targets.local import processes
from runner.targets.local.cgroup import Cgroup
from runner.targets.local.processes import entering

pytestmark = pytest.mark.integration

# prints the parent-death signal (prctl PR_GET_PDEATHSIG) and the cgroup2 the task runs in
SHOW = (
    "import ctypes; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value, [l for l in"
    " open('/proc/self/cgroup') if l.startswith('0::')][0].strip())"
)
WITH_SETPRIV = os.environ.get("PATH", os.defpath)
WITHOUT_SETPRIV = "/nonexistent"  # the shell finds no setpriv: the Python step runs


def enter(argv: list[str], cgroup: Cgroup | None, parent: int, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        entering(argv, cgroup, parent), env={"PATH": path}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("path", [WITH_SETPRIV, WITHOUT_SETPRIV], ids=["setpriv", "python"])
def test_the_task_joins_the_cgroup_with_sigkill_as_its_parent_death_signal(test_cgroup, path):
    done = enter([sys.executable, "-c", SHOW], test_cgroup, os.getpid(), path)
    assert done.returncode == 0, done.stderr
    signal_number, where = done.stdout.split()
    assert signal_number == "9"
    assert where.endswith("/" + test_cgroup.path.name)


@pytest.mark.parametrize("path", [WITH_SETPRIV, WITHOUT_SETPRIV], ids=["setpriv", "python"])
def test_a_task_whose_tftrain_is_gone_never_starts(tmp_path, path):
    marker = tmp_path / "started"
    done = enter(["/bin/sh", "-c", f"touch {marker}"], None, 1, path)  # its parent is not pid 1: as if re-parented
    assert done.returncode == 137
    assert not marker.exists()


@pytest.mark.parametrize("path", [WITH_SETPRIV, WITHOUT_SETPRIV], ids=["setpriv", "python"])
def test_a_cgroup_that_cannot_be_joined_is_one_warning_and_the_task_runs(tmp_path, path):
    done = enter([sys.executable, "-c", "print('ran')"], Cgroup(tmp_path / "gone"), os.getpid(), path)
    assert done.returncode == 0
    assert done.stdout == "ran\n"
    assert done.stderr.startswith("tftrain: warning: ") and "runs outside the run's cgroup" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_program_that_is_not_found_is_one_line(tmp_path):
    done = enter(["no-such-program"], None, os.getpid(), WITH_SETPRIV)
    assert done.returncode == 127
    assert done.stderr == "tftrain: cannot start no-such-program: not found\n"


def test_without_a_shell_python_enters(test_cgroup, monkeypatch):
    monkeypatch.setattr(processes, "SHELL", "/nonexistent/sh")
    done = enter([sys.executable, "-c", SHOW], test_cgroup, os.getpid(), WITH_SETPRIV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "9"
