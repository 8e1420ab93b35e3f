"""Training processes: each in its own process group, stopped as a whole tree.

tftrain makes itself a child subreaper (Linux), so a grandchild that escapes its group with
setsid() is re-parented to tftrain instead of init, and `stop_tree` can still find and end it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def spawn(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[subprocess.Popen, int]:
    """Start argv in a new session; returns the process and the read end of its stdout+stderr."""
    read_fd, write_fd = os.pipe()
    try:
        process = subprocess.Popen(
            list(argv),
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
    return process, read_fd


def signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_tree(processes: Sequence[subprocess.Popen], grace: float, marker: str) -> None:
    """SIGTERM every group, wait up to `grace` seconds, SIGKILL what is left, sweep orphans."""
    for process in processes:
        signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for process in processes:
        signal_group(process, signal.SIGKILL)
        process.wait()
    sweep_descendants(marker)


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
