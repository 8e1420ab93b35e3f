"""Running `tftrain run` where a test can see and end all it starts: in a cgroup of the test's own
(the `test_cgroup` fixture), so the run cgroups tftrain makes next to its own land below it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from conftest import TFTRAIN
from watching import alive

from runner.targets.local.cgroup import Cgroup

ENTER_CGROUP = 'echo 0 > "$0/cgroup.procs" && exec "$@"'


def start(manifest: Path, cgroup: Cgroup) -> subprocess.Popen:
    """`tftrain run` as a process in `cgroup` (moved there by a shell that then execs tftrain)."""
    argv = ["/bin/sh", "-c", ENTER_CGROUP, str(cgroup.path), TFTRAIN, "run", "-f", str(manifest)]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def run_cgroups(cgroup: Cgroup) -> list[str]:
    parent = cgroup.path / "tftrain"
    return sorted(entry.name for entry in parent.iterdir() if entry.is_dir()) if parent.exists() else []


def wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def pids_in(path: Path) -> list[int]:
    return [int(pid) for pid in path.read_text().split()]


def watcher_of(tftrain: int) -> int:
    """The pid of the run's watcher (runner/targets/local/watcher.py): a child of tftrain's."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            if ppid == str(tftrain) and b"tftrain-watch" in argv:
                return int(entry.name)
    raise AssertionError(f"tftrain {tftrain} has no watcher")
