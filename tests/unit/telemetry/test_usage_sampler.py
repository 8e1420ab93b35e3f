"""GPU telemetry through a fake NVML at the library boundary: a `pynvml` module object with the
functions the real nvidia-ml-py has and the return types it gives (ctypes structures with the same
fields), installed in sys.modules where the sampler imports it. And the procfs side, fed hostile files."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest
from fake_nvml import GIB, fake_nvml

from runner.telemetry.usage_sampler import GpuMonitor, ProcessMemory, UsageSampler, cpu_seconds_of


@pytest.fixture
def installed(monkeypatch):
    def install(nvml):
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        return nvml

    return install


def test_each_gpu_is_sampled_as_metrics_and_summed_up(installed):
    nvml = installed(fake_nvml())
    monitor = GpuMonitor.open()
    first = monitor.sample(0, 100.0)
    monitor.sample(5, 105.0)
    assert [(p.name, p.value, p.step, p.source) for p in first] == [
        ("system/gpu0/utilization", 90.0, 0, "system"),
        ("system/gpu0/memory_used", 3.0 * GIB, 0, "system"),
        ("system/gpu1/utilization", 10.0, 0, "system"),
        ("system/gpu1/memory_used", 1.0 * GIB, 0, "system"),
    ]
    stats = monitor.stats()
    assert [(s.index, s.utilization_mean, s.memory_peak_bytes, s.memory_total_bytes, s.samples) for s in stats] == [
        (0, 90.0, 3 * GIB, 16 * GIB, 2),
        (1, 10.0, 1 * GIB, 16 * GIB, 2),
    ]
    assert stats[0].name == "NVIDIA H100 80GB HBM3"
    monitor.close()
    assert nvml.calls == {"init": 1, "shutdown": 1, "samples": 2}


@pytest.mark.parametrize("memory_v2", [True, False, "refused"])
def test_memory_used_leaves_out_what_the_driver_reserves_where_nvml_can_say(installed, memory_v2):
    """On an H200 the first reading counted the driver's 615 MiB as used (nvidia-smi said 13427 MiB,
    tftrain 14042): v2's `used` is what nvidia-smi shows. An older binding or driver: the first reading."""
    nvml = installed(fake_nvml(utilization=(50,), used=(3 * GIB,), reserved=615 << 20, memory_v2=memory_v2))
    monitor = GpuMonitor.open()
    for step in range(3):
        points = monitor.sample(step, float(step))
    expected = 3 * GIB if memory_v2 is True else 3 * GIB + (615 << 20)
    assert points[1].value == expected and monitor.stats()[0].memory_peak_bytes == expected
    assert (monitor.memory_v2 is not None) == (memory_v2 is True)
    monitor.close()
    assert nvml.calls["shutdown"] == 1


def test_cuda_visible_devices_picks_the_gpus(installed):
    installed(fake_nvml(utilization=(1, 2, 3), used=(1, 2, 3)))
    assert [index for index, _, _ in GpuMonitor.open(visible="2,0,9").devices] == [2, 0]  # 9 does not exist
    assert [index for index, _, _ in GpuMonitor.open(visible="GPU-8f3a").devices] == [0, 1, 2]  # UUIDs: all
    # as CUDA reads it, and as the capacity check and a sweep's shares count: the list ends at a -1,
    # an empty entry or a GPU named twice (the sampler read "0,-1,1" as every GPU, "1,,2" as 1 and 2)
    assert [index for index, _, _ in GpuMonitor.open(visible="0,-1,1").devices] == [0]
    assert [index for index, _, _ in GpuMonitor.open(visible="1,,2").devices] == [1]
    assert [index for index, _, _ in GpuMonitor.open(visible="1,1,2").devices] == [1]
    assert GpuMonitor.open(visible="-1") is None  # no GPU at all


def test_no_pynvml_or_no_driver_is_no_gpu_block_and_no_error(installed, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert GpuMonitor.open() is None
    installed(fake_nvml(init_error=12))  # NVMLError_LibraryNotFound: a machine without a GPU
    assert GpuMonitor.open() is None
    installed(fake_nvml(utilization=(), used=()))
    assert GpuMonitor.open() is None


def test_hostile_driver_values_are_clamped(installed):
    installed(fake_nvml(utilization=(250,), used=(2 * GIB,)))
    monitor = GpuMonitor.open()
    utilization, _ = monitor.sample(0, 0.0)
    assert utilization.value == 100.0


def test_the_sampler_records_gpu_points_off_the_training_path_and_stops_quietly_when_nvml_fails(installed):
    installed(fake_nvml(fail_after=2))
    points, warnings = [], []
    sampler = UsageSampler(
        points.extend, GpuMonitor.open(), warn=warnings.append, gpu_interval=0.01, first_gpu_after=0.01
    )
    with sampler:
        deadline = time.monotonic() + 5
        while not warnings and time.monotonic() < deadline:
            time.sleep(0.01)
    assert sampler.thread.name == "usage-sampler" and sampler.thread is not threading.main_thread()
    assert len(points) == 2 * 2 * 2  # two samples of two GPUs, two series each, then the GPU was lost
    assert warnings == ["GPU telemetry stopped: NVML failed (GPU is lost)"]
    gpu0, gpu1 = sampler.gpu_stats()  # what was sampled before still counts
    assert gpu0.samples == 2 and gpu0.utilization_mean == 90.0


def test_the_first_gpu_reading_waits_for_the_run_and_a_short_run_gets_one_as_it_ends(installed):
    """NVML's utilisation covers its last second: a reading at the start described the time before
    the run (the H200 check: a 25 s run's mean read 55 % where nvidia-smi saw 99 % most of it)."""
    installed(fake_nvml())
    points = []
    sampler = UsageSampler(points.extend, GpuMonitor.open(), gpu_interval=0.01, first_gpu_after=0.3)
    with sampler:
        time.sleep(0.1)
        assert points == []  # nothing read yet: the run has not had its first second
        deadline = time.monotonic() + 5
        while not points and time.monotonic() < deadline:
            time.sleep(0.01)
        assert time.monotonic() - sampler.started >= 0.3
    short = []
    with UsageSampler(short.extend, GpuMonitor.open(), first_gpu_after=60.0) as ended_early:
        pass
    gpu0, gpu1 = ended_early.gpu_stats()
    assert gpu0.samples == 1 and len(short) == 2 * 2  # one reading of two GPUs as the run ended


def test_without_anything_to_sample_no_thread_starts():
    with UsageSampler(lambda points: None) as sampler:
        pass
    assert not sampler.thread.is_alive() and sampler.gpu_stats() is None and sampler.cpu_seconds is None


def _process(proc, pid, environ: bytes, status: bytes):
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "environ").write_bytes(environ)
    (proc / str(pid) / "status").write_bytes(status)


def test_peak_memory_per_rank_from_procfs(tmp_path):
    _process(tmp_path, 10, b"PATH=/bin\0TFTRAIN_RANK=0\0", b"Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n")
    _process(tmp_path, 11, b"TFTRAIN_RANK=0\0", b"VmHWM:\t  4096 kB\n")  # a child of rank 0: its largest counts
    _process(tmp_path, 12, b"OMPI_COMM_WORLD_RANK=1\0", b"VmHWM:\t  1024 kB\n")
    _process(tmp_path, 13, b"PATH=/bin\0", b"VmHWM:\t 99999 kB\n")  # mpirun itself: no rank
    memory = ProcessMemory(tmp_path)
    memory.sample([10, 11, 12, 13, 14])  # 14: gone meanwhile
    assert memory.peaks == {"0": 4096 * 1024, "1": 1024 * 1024}


@pytest.mark.parametrize(
    ("environ", "status"),
    [
        (b"TFTRAIN_RANK=-1\0", b"VmHWM:\t 10 kB\n"),
        (b"TFTRAIN_RANK=99999999999999999999\0", b"VmHWM:\t 10 kB\n"),
        (b"TFTRAIN_RANK=0\0", b"VmHWM:\t 1e99 kB\n"),
        (b"TFTRAIN_RANK=0\0", b"VmHWM:\t 9999999999999999999999 kB\n"),
        (b"TFTRAIN_RANK=0\0", b"VmHWM:\t 10 MB\n"),
        (b"TFTRAIN_RANK=0\0", b"\xff" * 100000),
        (b"\0" * (1 << 20) + b"TFTRAIN_RANK=0\0", b"VmHWM:\t 10 kB\n"),  # past what is read
    ],
)
def test_hostile_procfs_values_are_no_values(tmp_path, environ, status):
    _process(tmp_path, 20, environ, status)
    memory = ProcessMemory(tmp_path)
    memory.sample([20])
    assert memory.peaks == {}


def test_a_run_that_forks_without_end_is_measured_by_its_first_processes(tmp_path):
    memory = ProcessMemory(tmp_path)
    memory.sample(list(range(1, 100000)))  # nothing there: returns at once, bounded
    assert memory.peaks == {}


def test_cpu_time_from_cpu_stat(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert cpu_seconds_of(tmp_path) == 2.5
    (tmp_path / "cpu.stat").write_text("usage_usec lots\n")
    assert cpu_seconds_of(tmp_path) is None
    assert cpu_seconds_of(tmp_path / "missing") is None


def test_the_fake_has_the_real_nvml_s_shape():
    """The fake stays honest: every function it offers is nvidia-ml-py's, called the same way, and its
    structures have the real ones' fields (the `test` extra installs nvidia-ml-py)."""
    import inspect

    import pynvml

    fake = fake_nvml()
    for name in [n for n, value in vars(fake).items() if n.startswith("nvml") and callable(value)]:
        real = inspect.signature(getattr(pynvml, name))
        assert list(inspect.signature(getattr(fake, name)).parameters) == list(real.parameters), name
    assert fake.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    for name in ("c_nvmlUtilization_t", "c_nvmlMemory_t", "c_nvmlMemory_v2_t"):
        assert [f for f, _ in getattr(fake, name)._fields_] == [f for f, _ in getattr(pynvml, name)._fields_]
    assert issubclass(pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError)
    try:  # a machine without a GPU (this one) has no library: GpuMonitor.open takes that as no GPU
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        assert GpuMonitor.open() is None
    else:  # a GPU machine: the real library is sampled
        pynvml.nvmlShutdown()
        monitor = GpuMonitor.open()
        assert monitor is not None and monitor.sample(0, 0.0)
        monitor.close()


def test_the_sampler_follows_the_run_s_process_group_once_it_exists(tmp_path):
    proc = tmp_path / "proc"
    _process(proc, 30, b"TFTRAIN_RANK=0\0", b"VmHWM:\t 512 kB\n")
    group = types.SimpleNamespace(path=tmp_path / "cgroup", pids=lambda: [30])
    group.path.mkdir()
    (group.path / "cpu.stat").write_text("usage_usec 1500000\n")
    asked = []

    def find():  # the cgroup is made when the training starts: not there at the first tick
        asked.append(1)
        return group if len(asked) > 1 else None

    sampler = UsageSampler(lambda points: None, group=find, memory_interval=0.01, memory=ProcessMemory(proc))
    with sampler:
        deadline = time.monotonic() + 5
        while sampler.cpu_seconds is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert sampler.cpu_seconds == 1.5 and sampler.memory.peaks == {"0": 512 * 1024}
    assert len(asked) == 2  # found once, then kept


def test_a_process_group_that_cannot_be_read_stops_only_its_telemetry(tmp_path):
    def pids():
        raise PermissionError(13, "Permission denied", "cgroup.procs")

    warnings = []
    group = types.SimpleNamespace(path=tmp_path, pids=pids)
    with UsageSampler(lambda points: None, group=lambda: group, warn=warnings.append, memory_interval=0.01) as sampler:
        deadline = time.monotonic() + 5
        while not warnings and time.monotonic() < deadline:
            time.sleep(0.01)
    assert warnings == ["memory and CPU telemetry stopped: [Errno 13] Permission denied: 'cgroup.procs'"]
    assert sampler.memory.peaks == {} and sampler.cpu_seconds is None


def test_the_gpus_telemetry_has_no_goal_in_the_metrics_tables():
    """The console, summary.md and model card showed `system/gpu0/memory_used … maximize`: a GPU's
    memory is measured, not a score; its best is still its peak."""
    from runner.telemetry.report import metric_rows

    stats = {"last": 1.0, "best": 3.0, "best_step": 5, "count": 7}
    rows = metric_rows(
        {
            "primary": "loss",
            "metrics": {
                "loss": {**stats, "goal": "minimize"},
                "system/gpu0/memory_used": {**stats, "goal": "maximize"},
            },
        }
    )
    assert [(row["name"], row["goal"]) for row in rows] == [("loss", "minimize"), ("system/gpu0/memory_used", "")]
    assert rows[0]["best"] == rows[1]["best"]  # the peak, shown as any best is
