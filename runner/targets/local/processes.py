"""Training processes: each in a session of its own, all in the run's cgroup, stopped as a whole.

A run's processes cannot outlive it:
- the run's cgroup (cgroup.py) holds everything they start, double-forked daemons with an empty
  environment included, and is killed as a whole when the run ends;
- the processes tftrain starts die with it (PR_SET_PDEATHSIG), even of SIGKILL; what they
  started is killed with the cgroup by the run's watcher (watcher.py) as soon as tftrain is gone,
  and, where no watcher could start, by `reap_run` once the next command finds tftrain gone;
- where no cgroup can be made, tftrain is a child subreaper (Linux): a grandchild that escapes
  its group with setsid() is re-parented to tftrain instead of init, and the sweep ends every
  descendant whose environment carries the run's marker (TFTRAIN_RUN_ID).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from runner.targets.base import CANNOT_START_SH
from runner.targets.containment import run_cgroup_name
from runner.targets.local import cgroup as cgroups
from runner.targets.local.cgroup import Cgroup
from runner.targets.local.watcher import Watcher

SHELL = "/bin/sh"
POLL_SECONDS = 0.05

# Runs between tftrain's fork and the training's exec (same pid): joins the run's cgroup before
# the training can start anything, asks for SIGKILL when tftrain dies, then execs the task. It is
# a fresh single-threaded process, so locks held by tftrain's threads at fork time cannot deadlock
# it the way they can a preexec_fn; between fork and its exec only _posixsubprocess's
# async-signal-safe C code runs.
#
# A shell and util-linux's setpriv (≥ 2.33) do it in ~5 ms; the inner shell reads its parent after
# setpriv set the signal, so a tftrain that died before that is seen (exit 137). Where setpriv
# cannot, a Python interpreter does the same (ENTER, ~20 ms).
ENTER_SH = (
    "procs=$1 parent=$2 python=$3 enter=$4; shift 4\n"
    + CANNOT_START_SH
    + """
if [ -n "$procs" ] && ! { echo 0 >"$procs"; } 2>/dev/null; then
  echo "tftrain: warning: $1 runs outside the run's cgroup ($procs cannot be written)" >&2
fi
if setpriv --pdeathsig KILL true 2>/dev/null; then
  exec setpriv --pdeathsig KILL -- /bin/sh -c '[ "$PPID" = "$0" ] || exit 137; exec "$@"' "$parent" "$@"
fi
exec "$python" -I -S -c "$enter" "" "$parent" "$@"
"""
)
ENTER = """\
import ctypes, os, sys
procs, parent, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if procs:
    try:
        with open(procs, "w") as handle:
            handle.write("0")
    except OSError as exc:
        print(f"tftrain: warning: {argv[0]} runs outside the run's cgroup ({procs}: {exc.strerror})", file=sys.stderr)
ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
if os.getppid() != parent:  # tftrain died before the line above
    sys.exit(137)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    print(f"tftrain: cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
    sys.exit(127)
"""


def entering(argv: Sequence[str], cgroup: Cgroup | None, parent: int) -> list[str]:
    """argv, started through ENTER (cgroup, parent-death signal), where that is possible."""
    if sys.platform != "linux" or not sys.executable:
        return list(argv)
    procs = str(cgroup.path / "cgroup.procs") if cgroup else ""
    if not os.access(SHELL, os.X_OK):
        return [sys.executable, "-I", "-S", "-c", ENTER, procs, str(parent), *argv]
    return [SHELL, "-c", ENTER_SH, "tftrain-enter", procs, str(parent), sys.executable, ENTER, *argv]


class RunProcesses:
    """What one run starts, and how all of it ends."""

    def __init__(self, marker: str, cgroup: Cgroup | None, warn: Callable[[str], None]) -> None:
        self.marker, self.cgroup, self.warn = marker, cgroup, warn
        self.started: list[subprocess.Popen] = []
        self.watcher: Watcher | None = None

    def spawn(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[subprocess.Popen, int]:
        """Start argv in a new session; returns the process and the read end of its stdout+stderr.

        Its parent-death signal comes when the thread that started it ends: the one that
        supervises it, as LocalTarget.execute does."""
        _check_executable(argv[0], cwd, env)
        read_fd, write_fd = os.pipe()
        try:
            process = subprocess.Popen(
                entering(argv, self.cgroup, os.getpid()),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.started.append(process)
        return process, read_fd

    def guard(self, marker: str) -> None:
        """Start the watcher that kills all of it the moment tftrain dies (watcher.py): after the
        tasks, so that the script's start never waits for it. `marker` (NAME=VALUE, unique to the
        run) finds the run's processes where there is no cgroup."""
        cgroup = str(self.cgroup.path) if self.cgroup is not None else None
        self.watcher, why = Watcher.start(cgroup, marker)
        if self.watcher is None:
            self.warn(
                f"no watcher for this run ({why}): if tftrain is killed, its processes live until the next tftrain"
                " command"
            )

    def stop(self, grace: float, force: threading.Event | None = None) -> None:
        """SIGTERM everything, wait up to `grace` seconds for the started processes (no longer
        once `force` is set: a second signal to tftrain), then kill all of it."""
        force = force or threading.Event()
        running = [process for process in self.started if process.poll() is None]
        for process in running:
            signal_group(process, signal.SIGTERM)
        if running and self.cgroup is not None:
            self.cgroup.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(process.poll() is None for process in running):
            left = deadline - time.monotonic()
            if left <= 0 or force.wait(min(left, POLL_SECONDS)):
                break
        self.kill()

    def kill(self) -> None:
        """SIGKILL everything the run started, at once."""
        for process in self.started:
            signal_group(process, signal.SIGKILL)
        victims: list[int] = []
        if self.cgroup is not None:
            try:
                victims = self.cgroup.kill()
            except OSError as exc:
                self.warn(f"could not kill the run's cgroup {self.cgroup.path}: {exc.strerror}")
        for process in self.started:
            process.wait()
        own = {process.pid for process in self.started}
        _reap([pid for pid in victims if pid not in own])  # orphans re-parented to us
        sweep_descendants(self.marker)

    def close(self, grace: float, force: threading.Event | None = None) -> None:
        """Stop what is left (see `stop`) and remove the run's cgroup."""
        self.stop(grace, force)
        if self.watcher is not None:  # before the cgroup goes: a watcher never acts on a removed one
            self.watcher.dismiss()
        if self.cgroup is not None:
            try:
                self.cgroup.remove()
            except OSError as exc:
                self.warn(f"could not remove the run's cgroup {self.cgroup.path}: {exc.strerror}")


def contain(marker: str, cgroup_name: str | None, warn: Callable[[str], None]) -> RunProcesses:
    """A run's processes, in a new cgroup; where none can be made, one warning says why."""
    if sys.platform != "linux":
        cgroup, why = None, "not Linux"
    elif cgroup_name is None:
        cgroup, why = None, "it has no cgroup name"
    else:
        cgroup, why = cgroups.create(cgroup_name)
    if cgroup is None:
        warn(f"no cgroup for this run ({why}): what it leaves behind is found by its {marker.split('=')[0]} only")
    return RunProcesses(marker, cgroup, warn)


def reap_run(run_id: str, home: Path) -> int:
    """Kill what is left of a run whose tftrain is gone and remove its cgroup. Returns the number
    of processes killed: 0 when there is nothing (no cgroup, or no cgroups here at all)."""
    victims: list[int] = []
    try:
        cgroup = cgroups.find(run_cgroup_name(run_id, home))
        if cgroup is not None and os.getpid() not in cgroup.pids():  # never ourselves
            victims = cgroup.kill()
            cgroup.remove()
    except OSError:
        pass  # not ours to kill (not root), or gone meanwhile
    return len(victims)


def _check_executable(program: str, cwd: Path, env: Mapping[str, str]) -> None:
    """Refuse a program that cannot start, as Popen would have: ENTER execs it only later."""
    if os.sep in program:
        path = Path(cwd, program)
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def sweep_descendants(marker: str) -> list[int]:
    """Kill every descendant of ours (orphans re-parented to us included) whose environment
    carries `marker` (NAME=VALUE): the processes of one run, and nothing else of ours."""
    killed = []
    needle = marker.encode() + b"\0"
    for _ in range(20):
        children = [pid for pid in _descendants(os.getpid()) if _has_env(pid, needle)]
        if not children:
            break
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        _reap(children)
    return killed


def _reap(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # not our direct child; its own parent (or we, later) reaps it


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return (b"\0" + needle) in (b"\0" + handle.read())
    except OSError:
        return False


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields start after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] == b"Z":
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
