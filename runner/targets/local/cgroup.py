"""Cgroup v2 containment: a run's processes live in a cgroup of their own and end as a whole.

Whatever the training starts stays in its cgroup: setsid, double forks and an emptied
environment change nothing, so `Cgroup.kill` ends all of it. Run cgroups are made below a
`tftrain` cgroup next to the one tftrain itself sits in (`0::` in /proc/self/cgroup); tftrain
never moves itself. No controller is ever enabled, so cgroup v2's no-internal-process rule does
not apply: the run cgroups are leaves without controllers, and the cgroup tftrain sits in may
hold processes and children alike (on a pure v2 host as on a hybrid one, where cgroup2 is
mounted at /sys/fs/cgroup/unified).

A run's cgroup is named after its run id and its TFTRAIN_HOME, so a later tftrain (any command
that finds the run's owner gone) can find it again from those two alone.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from pathlib import Path
from typing import NamedTuple

PARENT = "tftrain"
KILL_WAIT_SECONDS = 10.0
POLL_SECONDS = 0.01
SEARCH_DEPTH = 12


class Cgroup(NamedTuple):
    path: Path

    def pids(self) -> list[int]:
        """Every process in this cgroup and the cgroups below it (the training may make some)."""
        found = []
        for directory in self._tree():
            try:
                found += [int(line) for line in (directory / "cgroup.procs").read_text().split()]
            except FileNotFoundError:
                continue  # removed meanwhile
        return found

    def populated(self) -> bool:
        try:
            return "populated 1" in (self.path / "cgroup.events").read_text()
        except FileNotFoundError:
            return False

    def signal(self, sig: int) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> list[int]:
        """SIGKILL everything in it, at once (cgroup.kill; else frozen, then each process) and wait
        until it is empty. Returns the processes it held."""
        victims: list[int] = []
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        while self.populated() and time.monotonic() < deadline:
            pids = self.pids()
            victims += [pid for pid in pids if pid not in victims]
            try:
                if (self.path / "cgroup.kill").exists():  # Linux 5.14
                    _write(self.path / "cgroup.kill", "1")
                else:
                    self._freeze_and_kill(pids)
            except FileNotFoundError:
                break  # removed meanwhile: nothing left in it
            for _ in range(100):
                if not self.populated():
                    break
                time.sleep(POLL_SECONDS)
        return victims

    def _freeze_and_kill(self, pids: list[int]) -> None:
        # frozen, nothing in it can fork while its processes are killed one by one (Linux 5.2)
        frozen = (self.path / "cgroup.freeze").exists()
        if frozen:
            _write(self.path / "cgroup.freeze", "1")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)  # a frozen process still dies of SIGKILL
            except ProcessLookupError:
                pass
        if frozen:
            _write(self.path / "cgroup.freeze", "0")

    def remove(self) -> None:
        """Remove it and any cgroup below it; a cgroup that still holds processes stays."""
        for directory in reversed(self._tree()):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise

    def _tree(self) -> list[Path]:
        """This cgroup, then the ones below it, parents first."""
        tree, index = [self.path], 0
        while index < len(tree):
            try:
                tree += sorted(_subdirectories(tree[index]))
            except FileNotFoundError:
                pass  # removed meanwhile
            index += 1
        return tree


def _subdirectories(directory: Path) -> list[Path]:
    return [Path(entry.path) for entry in os.scandir(directory) if entry.is_dir(follow_symlinks=False)]


def _write(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def unified_mount(mountinfo: str) -> tuple[Path, str] | None:
    """Where cgroup2 is mounted, from /proc/self/mountinfo text: (mount point, root of the mount)."""
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if tail.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(_unescape(fields[4])), _unescape(fields[3])
    return None


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def own_cgroup(proc_cgroup: str) -> str | None:
    """The cgroup v2 path of a process, from /proc/PID/cgroup text (the `0::` line)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def runs_parent(mountinfo: str, proc_cgroup: str) -> tuple[Path | None, str]:
    """The directory run cgroups are made in (`tftrain` next to our own cgroup), or None and why."""
    mount = unified_mount(mountinfo)
    if mount is None:
        return None, "no cgroup2 file system is mounted"
    own = own_cgroup(proc_cgroup)
    if own is None:
        return None, "this process has no cgroup v2 path (/proc/self/cgroup has no 0:: line)"
    point, root = mount
    root = root.rstrip("/")
    if root and not (own == root or own.startswith(root + "/")):
        return None, f"our cgroup {own} is outside the cgroup2 mount at {point}"
    return point / own[len(root) :].lstrip("/") / PARENT, ""


def _parent_here() -> tuple[Path | None, str]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError as exc:
        return None, f"cannot read /proc/self: {exc.strerror}"
    return runs_parent(mountinfo, proc_cgroup)


def create(name: str) -> tuple[Cgroup | None, str]:
    """A new cgroup for a run, or None and why there is none (no cgroup2, not root, read-only)."""
    parent, why = _parent_here()
    if parent is None:
        return None, why
    path = parent / name
    try:
        parent.mkdir(exist_ok=True)
        if path.is_dir():  # a run of the same id in a history made anew: what it left must go
            leftover = Cgroup(path)
            leftover.kill()
            leftover.remove()
        path.mkdir()
    except OSError as exc:
        return None, f"cannot create a cgroup in {parent}: {exc.strerror}"
    if not os.access(path / "cgroup.procs", os.W_OK):
        path.rmdir()
        return None, f"{path}/cgroup.procs is not writable"
    return Cgroup(path), ""


def nearby(name: str) -> Cgroup | None:
    """A run's cgroup next to our own, when it is there: no search (cheap enough to ask every second)."""
    parent, _ = _parent_here()
    return Cgroup(parent / name) if parent is not None and (parent / name).is_dir() else None


def find(name: str) -> Cgroup | None:
    """A run's cgroup: next to our own cgroup, else wherever its tftrain sat (any `tftrain/NAME`)."""
    parent, _ = _parent_here()
    if parent is None:
        return None
    if (parent / name).is_dir():
        return Cgroup(parent / name)
    mount = unified_mount(Path("/proc/self/mountinfo").read_text())
    return _search(mount[0], name, SEARCH_DEPTH) if mount else None


def _search(directory: Path, name: str, depth: int) -> Cgroup | None:
    if depth == 0:
        return None
    try:
        children = _subdirectories(directory)
    except OSError:
        return None
    for child in children:
        if child.name == PARENT and (child / name).is_dir():
            return Cgroup(child / name)
    for child in children:
        found = _search(child, name, depth - 1)
        if found is not None:
            return found
    return None
