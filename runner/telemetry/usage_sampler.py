"""Measuring a run while it trains, on one thread of tftrain's (never in the training's processes):
each GPU through NVML (`nvidia-ml-py`'s `pynvml`) every 5 s, recorded as metrics
(`system/gpu0/utilization`, `system/gpu0/memory_used`) and summed up as run.json's `usage.gpus`;
on the local target, the peak resident memory of each rank and the CPU time of the run's cgroup.

No GPU, no NVML library, no driver, or a driver that fails half-way: no GPU block, a warning at
most, never an error. What the training's processes expose (/proc/PID/environ and status, which
the training can shape) is read bounded and parsed strictly: a value that is no number is no value.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from runner.shared.machine import named_gpus
from runner.telemetry.point import TELEMETRY, MetricPoint

if TYPE_CHECKING:  # the record's model: built once the training has ended
    from runner.history.usage import GpuStats

GPU_INTERVAL = 5.0
# NVML's utilisation is the share of its last sample period (up to 1 s) the GPU was busy: a reading
# as the run starts describes the time before it (another job's work, or none). The first is taken
# once the run has had that long; a run that ends sooner gets one reading as it ends.
FIRST_GPU_SECONDS = 1.0
MEMORY_INTERVAL = 1.0
SOURCE = "system"
RANK_VARIABLES = (b"TFTRAIN_RANK=", b"OMPI_COMM_WORLD_RANK=", b"PMI_RANK=")
MAX_ENVIRON_BYTES = 1 << 18  # a rank's variable is near the start of what tftrain or mpirun hands it
MAX_STATUS_BYTES = 1 << 13
MAX_PIDS = 1024  # per sample: a run that forks without end is measured by its first processes
MAX_RANKS = 4096
MAX_DIGITS = 7
MAX_KNOWN_PIDS = 1 << 16  # pids whose rank was read: forgotten past this (a run that starts processes without end)


class GpuMonitor:
    """The GPUs NVML shows (those in CUDA_VISIBLE_DEVICES when it lists indices), sampled on request."""

    def __init__(self, nvml, devices: list[tuple[int, object, str | None]]) -> None:
        self.nvml = nvml
        self.devices = devices  # (index, handle, name)
        self.busy = {index: 0.0 for index, _, _ in devices}
        self.peak = {index: 0 for index, _, _ in devices}
        self.total: dict[int, int | None] = {index: None for index, _, _ in devices}
        self.samples = 0
        self.memory_v2 = getattr(nvml, "nvmlMemory_v2", None)  # None: a binding without it, or it failed once

    @classmethod
    def open(
        cls, nvml=None, visible: str | None = None, warn: Callable[[str], None] | None = None
    ) -> GpuMonitor | None:
        """None where there is nothing to sample: no pynvml (the `gpu` extra), no library, no GPU."""
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError:
                return None
        try:
            nvml.nvmlInit()
        except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded…: a machine without a GPU
            return None
        try:
            count = int(nvml.nvmlDeviceGetCount())
            devices = []
            for index in _visible(visible, count):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                devices.append((index, handle, _name(nvml, handle)))
        except Exception as exc:
            _shutdown(nvml)
            if warn is not None:
                warn(f"GPU telemetry is off: NVML could not list the GPUs ({_first_line(exc)})")
            return None
        if not devices:
            _shutdown(nvml)
            return None
        return cls(nvml, devices)

    def sample(self, step: int, now: float) -> list[MetricPoint]:
        """One reading of every GPU, as metric points. NVMLError (a GPU gone, a driver reset) passes up."""
        points = []
        for index, handle, _ in self.devices:
            utilization = _percent(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            used, total = self._memory(handle)
            self.busy[index] += utilization
            self.peak[index] = max(self.peak[index], used)
            self.total[index] = total or self.total[index]
            points += [
                MetricPoint(f"{TELEMETRY}gpu{index}/utilization", float(utilization), step, now, SOURCE),
                MetricPoint(f"{TELEMETRY}gpu{index}/memory_used", float(used), step, now, SOURCE),
            ]
        self.samples += 1
        return points

    def _memory(self, handle) -> tuple[int, int]:
        """(used, total) bytes as nvidia-smi shows them. NVML's v2 reading leaves out what the driver
        reserves for itself (615 MiB on an H200 with nothing running), which the first reading
        counts as used; the first reading where the binding or the driver has no v2."""
        if self.memory_v2 is not None:
            try:
                memory = self.nvml.nvmlDeviceGetMemoryInfo(handle, version=self.memory_v2)
                return _bytes(memory.used), _bytes(memory.total)
            except Exception:  # an older driver (FunctionNotFound, a version mismatch): v1 from now on
                self.memory_v2 = None
        memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
        return _bytes(memory.used), _bytes(memory.total)

    def stats(self) -> list[GpuStats]:
        from runner.history.usage import GpuStats

        if not self.samples:
            return []
        return [
            GpuStats(
                index=index,
                name=name,
                utilization_mean=round(self.busy[index] / self.samples, 2),
                memory_peak_bytes=self.peak[index],
                memory_total_bytes=self.total[index],
                samples=self.samples,
            )
            for index, _, name in self.devices
        ]

    def close(self) -> None:
        _shutdown(self.nvml)


def _visible(visible: str | None, count: int) -> list[int]:
    """CUDA_VISIBLE_DEVICES' GPUs as the capacity check and a sweep's shares read it (named_gpus: up
    to a -1, an empty entry or a repeat), those that exist; every GPU when it is unset or names
    GPUs otherwise (UUIDs)."""
    named = named_gpus(visible)
    if named is None or not all(item.isdigit() and len(item) <= MAX_DIGITS for item in named):
        return list(range(count))
    return [index for index in (int(item) for item in named) if index < count]


def _name(nvml, handle) -> str | None:
    try:
        name = nvml.nvmlDeviceGetName(handle)
    except Exception:
        return None
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    return name[:128].replace("|", "/")  # a table cell in the summary


def _percent(value) -> int:
    return min(100, max(0, int(value)))


def _bytes(value) -> int:
    return max(0, int(value))


def _shutdown(nvml) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class ProcessMemory:
    """Peak resident memory per rank, from the processes of the run's cgroup: each process's VmHWM
    (its own high-water mark, so a sample misses nothing of a process it sees), the largest per rank.
    A process's rank is the TFTRAIN_RANK (or MPI's rank variable) it was started with."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self.ranks: dict[int, int | None] = {}  # pid → its rank (None: no rank's), read once
        self.peaks: dict[str, int] = {}

    def sample(self, pids: list[int]) -> None:
        for pid in pids[:MAX_PIDS]:
            rank = self.ranks.get(pid, -1)
            if rank == -1:
                if len(self.ranks) >= MAX_KNOWN_PIDS:
                    self.ranks.clear()
                rank = self.ranks[pid] = _rank_of(self.proc / str(pid) / "environ")
            if rank is None:
                continue
            peak = _peak_of(self.proc / str(pid) / "status")
            key = str(rank)
            if peak is not None and (key in self.peaks or len(self.peaks) < MAX_RANKS):
                self.peaks[key] = max(self.peaks.get(key, 0), peak)


def _read_head(path: Path, limit: int) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:  # gone meanwhile, or not ours to read
        return None


def _rank_of(environ: Path) -> int | None:
    data = _read_head(environ, MAX_ENVIRON_BYTES)
    for entry in (data or b"").split(b"\0"):
        for name in RANK_VARIABLES:
            if entry.startswith(name):
                value = entry[len(name) :]
                return int(value) if value.isdigit() and len(value) <= MAX_DIGITS else None
    return None


def _peak_of(status: Path) -> int | None:
    """VmHWM in bytes (status says kB)."""
    data = _read_head(status, MAX_STATUS_BYTES)
    for line in (data or b"").splitlines():
        if line.startswith(b"VmHWM:"):
            fields = line.split()
            if len(fields) == 3 and fields[1].isdigit() and len(fields[1]) <= 12 and fields[2] == b"kB":
                return int(fields[1]) * 1024
            return None
    return None


def cpu_seconds_of(cgroup_dir: Path) -> float | None:
    """The CPU time the cgroup's processes used so far (cpu.stat's usage_usec: in every cgroup v2)."""
    data = _read_head(cgroup_dir / "cpu.stat", MAX_STATUS_BYTES)
    for line in (data or b"").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == b"usage_usec" and fields[1].isdigit() and len(fields[1]) <= 20:
            return int(fields[1]) / 1e6
    return None


class ProcessGroup(Protocol):
    """The run's processes as a target finds them (the local target's cgroup): every pid in it, and
    the directory whose cpu.stat counts their CPU time."""

    path: Path

    def pids(self) -> list[int]: ...


class UsageSampler:
    """The thread: GPUs every `gpu_interval` (their points to `record`), the run's processes every
    `memory_interval`. `group` finds them: a ProcessGroup once it exists (None until then)."""

    def __init__(
        self,
        record: Callable[[list[MetricPoint]], None],
        gpus: GpuMonitor | None = None,
        group: Callable[[], ProcessGroup | None] | None = None,
        warn: Callable[[str], None] | None = None,
        gpu_interval: float = GPU_INTERVAL,
        memory_interval: float = MEMORY_INTERVAL,
        memory: ProcessMemory | None = None,
        first_gpu_after: float = FIRST_GPU_SECONDS,
    ) -> None:
        self.record, self.gpus, self.group, self.warn = record, gpus, group, warn
        self.gpu_interval, self.memory_interval, self.first_gpu_after = gpu_interval, memory_interval, first_gpu_after
        self.memory = memory or ProcessMemory()
        self.found: ProcessGroup | None = None
        self.cpu_seconds: float | None = None
        self.kept: list[GpuStats] | None = None  # the GPUs' figures when NVML failed half-way
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="usage-sampler", daemon=True)
        self.started = 0.0

    def __enter__(self) -> UsageSampler:
        self.started = time.monotonic()
        if self.gpus is not None or self.group is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()
        if self.gpus is not None and not self.gpus.samples:  # a run shorter than FIRST_GPU_SECONDS
            self._sample_gpus(time.monotonic())
        if self.gpus is not None:
            self.gpus.close()

    def gpu_stats(self) -> list[GpuStats] | None:
        return (self.gpus.stats() or None) if self.gpus is not None else self.kept

    def _loop(self) -> None:
        next_gpu, next_memory = self.started + self.first_gpu_after, self.started
        while not self.done.is_set():
            now = time.monotonic()
            if self.gpus is not None and now >= next_gpu:
                self._sample_gpus(now)
                next_gpu = now + self.gpu_interval
            if self.group is not None and now >= next_memory:
                try:
                    self._sample_processes()
                except OSError as exc:  # the group cannot be read (not ours, gone): the run goes on unmeasured
                    if self.warn is not None:
                        self.warn(f"memory and CPU telemetry stopped: {exc}")
                    self.group = None
                next_memory = now + self.memory_interval
            waits = [at for at, on in ((next_gpu, self.gpus), (next_memory, self.group)) if on is not None]
            if not waits:
                return
            self.done.wait(max(0.0, min(waits) - time.monotonic()))

    def _sample_gpus(self, now: float) -> None:
        try:
            points = self.gpus.sample(int(now - self.started), time.time())
        except Exception as exc:  # a GPU fell off the bus, the driver was reset: the run goes on unmeasured
            if self.warn is not None:
                self.warn(f"GPU telemetry stopped: NVML failed ({_first_line(exc)})")
            monitor, self.gpus = self.gpus, None
            self.kept = monitor.stats() or None  # what was sampled before still counts
            monitor.close()
            return
        self.record(points)

    def _sample_processes(self) -> None:
        if self.found is None:
            self.found = self.group()
            if self.found is None:
                return
        self.memory.sample(self.found.pids())
        used = cpu_seconds_of(self.found.path)
        if used is not None:
            self.cpu_seconds = used
