"""When the gate's process may start ahead, during the training: only while a CPU the training may
use sits idle (and memory is to spare). It imports TensorFlow, ~3 s of a core and ~0.55 GB; at
the lowest priority it still slowed a training on a busy 2-core machine by ~4 %. Where no core
goes idle while the training runs, it starts after the script ended.

Two readings one WINDOW_SECONDS apart decide (`decide`, pure): the idle time of the CPUs the
training may use (/proc/stat, the CPUs in tftrain's affinity, which the training inherits), within
what the CPU limits of tftrain's cgroups leave (cgroup v2 cpu.max, v1 cpu.cfs_quota_us), and the
memory available (MemAvailable, within the cgroups' memory limits). `read_times` takes a reading.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

IDLE_CPU = 0.8  # a CPU's worth of idle time over the window (80 %): a core the gate's process can take
WINDOW_SECONDS = 1.0
MEMORY_NEEDED = 1 << 30  # its process holds ~0.55 GB once TensorFlow is imported: twice that, to spare
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CpuTimes:
    """One reading of what the training's machine has free."""

    at: float  # time.monotonic()
    cpus: Mapping[int, tuple[int, int]]  # CPU → (idle, total) ticks since boot, for the CPUs the training may use
    limits: tuple[
        tuple[float, float], ...
    ] = ()  # each cgroup CPU limit above tftrain: (CPUs allowed, CPU-seconds used)
    memory: int | None = None  # bytes available; None: unknown


@dataclass(frozen=True)
class Decision:
    start: bool
    why: str
    idle: float = 0.0  # CPUs idle over the window


def idle_cpus(before: CpuTimes, after: CpuTimes) -> float:
    """CPUs' worth of idle time between two readings: on the CPUs the training may use, and no more
    than the tightest cgroup CPU limit leaves."""
    idle = 0.0
    for cpu, (idle_after, total_after) in after.cpus.items():
        idle_before, total_before = before.cpus.get(cpu, (idle_after, total_after))
        if total_after > total_before:
            idle += max(0, idle_after - idle_before) / (total_after - total_before)
    wall = after.at - before.at
    if wall > 0 and len(before.limits) == len(after.limits):
        for (allowed, used_before), (_, used_after) in zip(before.limits, after.limits):
            idle = min(idle, allowed - (used_after - used_before) / wall)
    return max(idle, 0.0)


def decide(
    before: CpuTimes, after: CpuTimes, cpus_needed: float = IDLE_CPU, memory_needed: int = MEMORY_NEEDED
) -> Decision:
    """Start the gate's process now when a CPU was idle between the readings and memory is to spare."""
    idle = idle_cpus(before, after)
    seen = f"{idle:.1f} of {len(after.cpus)} CPUs idle over {after.at - before.at:.1f} s"
    if idle < cpus_needed:
        return Decision(False, seen, idle)
    if after.memory is not None and after.memory < memory_needed:
        return Decision(
            False, f"{seen}, but {_gb(after.memory)} of memory available (it needs {_gb(memory_needed)})", idle
        )
    memory = f", {_gb(after.memory)} of memory available" if after.memory is not None else ""
    return Decision(True, seen + memory, idle)


def watch(sample: Callable[[], CpuTimes], wait: Callable[[float], bool], window: float = WINDOW_SECONDS) -> Decision:
    """Readings `window` apart until one shows an idle CPU (that decision), or until `wait` says the
    training ended (a decision not to start, saying how idle the machine was at most)."""
    before, most, readings = sample(), None, 0
    while wait(window):
        after = sample()
        decision = decide(before, after)
        if decision.start:
            return decision
        readings += 1
        most = decision if most is None or decision.idle > most.idle else most
        before = after
    if most is None:
        return Decision(False, "the training ended before the machine was read")
    return Decision(
        False, f"no CPU was idle while the training ran (at most {most.why}; {readings} readings)", most.idle
    )


# --- readings (the only part that touches the machine) -----------------------------------------
def parse_proc_stat(text: str, cpus: set[int] | None) -> dict[int, tuple[int, int]]:
    """/proc/stat's per-CPU lines: CPU → (idle + iowait, all but guest) ticks; only `cpus` (None: all)."""
    found = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        cpu = int(name[3:])
        ticks = [int(value) for value in rest.split()[:8] if value.isdigit()]  # user … steal (guest is counted in user)
        if len(ticks) >= 5 and (cpus is None or cpu in cpus):
            found[cpu] = (ticks[3] + ticks[4], sum(ticks))
    return found


def parse_cpu_limit(v2: str | None, quota: str | None, period: str | None) -> float | None:
    """CPUs a cgroup may use: v2's cpu.max ("max 100000", "150000 100000") or v1's quota and period; None: no limit."""
    try:
        if v2 is not None:
            limit, *length = v2.split() or ["max"]
            return None if limit == "max" else int(limit) / int(length[0] if length else 100000)
        if quota is not None and period is not None and int(quota) > 0:
            return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def parse_meminfo(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) > 1 and parts[1].isdigit() else None
    return None


def parse_own_cgroups(text: str) -> dict[str, str]:
    """/proc/self/cgroup: controller (v2: "") → tftrain's cgroup path."""
    found = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2]
    return found


@dataclass
class Machine:
    """Reads the machine for `watch`: the CPUs the training may use and tftrain's cgroups."""

    cpus: set[int] | None = None
    root: Path = CGROUP_ROOT
    own_cgroups: str | None = None  # /proc/self/cgroup's text (read when not given)
    _cgroups: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cpus is None:
            try:
                self.cpus = set(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                self.cpus = None
        self._cgroups = parse_own_cgroups(
            self.own_cgroups if self.own_cgroups is not None else _read(Path("/proc/self/cgroup")) or ""
        )

    def read_times(self) -> CpuTimes:
        cpus = parse_proc_stat(_read(Path("/proc/stat")) or "", self.cpus)
        return CpuTimes(time.monotonic(), cpus, tuple(self.cpu_limits()), self.memory())

    def _tree(self, controller: str) -> list[Path]:
        """tftrain's cgroup and those above it, in `controller`'s hierarchy."""
        path = self._cgroups.get(controller)
        if path is None:
            return []
        if controller == "":
            mount = self.root if (self.root / "cgroup.controllers").exists() else self.root / "unified"
        else:
            mount = next(
                (
                    self.root / name
                    for name in (controller, "cpu,cpuacct", "cpuacct,cpu")
                    if (self.root / name).is_dir()
                ),
                None,
            )
            if mount is None:
                return []
        directory = mount / path.lstrip("/")
        return [directory, *[parent for parent in directory.parents if parent.is_relative_to(mount)]]

    def cpu_limits(self) -> list[tuple[float, float]]:
        """(CPUs allowed, CPU-seconds used) of each of tftrain's cgroups, and those above it, with a CPU limit."""
        limits = []
        for directory in self._tree(""):
            allowed = parse_cpu_limit(_read(directory / "cpu.max"), None, None)
            used = _field(_read(directory / "cpu.stat"), "usage_usec")
            if allowed is not None and used is not None:
                limits.append((allowed, used / 1e6))
        accounting = self._tree("cpuacct")  # v1: usually mounted with cpu (cpu,cpuacct), else beside it
        for index, directory in enumerate(self._tree("cpu")):
            allowed = parse_cpu_limit(
                None, _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
            )
            used = _read(directory / "cpuacct.usage") or (
                _read(accounting[index] / "cpuacct.usage") if index < len(accounting) else None
            )
            if allowed is not None and used and used.strip().isdigit():
                limits.append((allowed, int(used) / 1e9))
        return limits

    def memory(self) -> int | None:
        """Bytes available: MemAvailable, no more than any memory limit of tftrain's cgroups leaves."""
        available = [parse_meminfo(_read(Path("/proc/meminfo")) or "")]
        for directory in self._tree(""):
            available.append(_headroom(_read(directory / "memory.max"), _read(directory / "memory.current")))
        for directory in self._tree("memory"):
            available.append(
                _headroom(_read(directory / "memory.limit_in_bytes"), _read(directory / "memory.usage_in_bytes"))
            )
        known = [value for value in available if value is not None]
        return min(known) if known else None


def _headroom(limit: str | None, used: str | None) -> int | None:
    if not limit or not used or not limit.strip().isdigit() or not used.strip().isdigit():
        return None  # "max", or not there
    if int(limit) >= 1 << 60:  # v1's "no limit"
        return None
    return max(int(limit) - int(used), 0)


def _field(text: str | None, name: str) -> int | None:
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def _gb(size: int) -> str:
    return f"{size / (1 << 30):.1f} GB"
