"""When the gate's process may start during the training (runner.serving.prestart): the decision from
two readings of the machine, given as data; the readers' parsing of /proc and cgroup files as text."""

from __future__ import annotations

import pytest

from runner.errors import UsageError
from runner.serving.prestart import (
    MEMORY_NEEDED,
    CpuTimes,
    Machine,
    decide,
    idle_cpus,
    parse_cpu_limit,
    parse_meminfo,
    parse_own_cgroups,
    parse_proc_stat,
    watch,
)
from runner.settings import GatePrestart, resolve

GB = 1 << 30


def reading(at: float, idle: list[int], total: int = 100, limits=(), memory: int | None = 8 * GB) -> CpuTimes:
    """CPUs with `idle[i]` idle ticks of `total` each since boot."""
    return CpuTimes(at, {cpu: (ticks, total) for cpu, ticks in enumerate(idle)}, tuple(limits), memory)


def test_both_cpus_busy_is_no_idle_core():
    decision = decide(reading(0, [10, 10]), reading(1, [13, 12], total=200))
    assert not decision.start and decision.idle == pytest.approx(0.05)
    assert decision.why == "0.1 of 2 CPUs idle over 1.0 s"


def test_one_cpu_idle_starts_it_and_says_why():
    decision = decide(reading(0, [10, 10]), reading(1, [105, 12], total=200))
    assert decision.start and decision.idle == pytest.approx(0.97)
    assert decision.why == "1.0 of 2 CPUs idle over 1.0 s, 8.0 GB of memory available"


def test_idle_time_spread_over_cpus_counts_as_a_core():
    # each of four CPUs half idle: two cores' worth, though no single one is free
    assert decide(reading(0, [0, 0, 0, 0]), reading(1, [50, 50, 50, 50], total=200)).start


def test_a_cpu_the_training_may_not_use_is_not_counted():
    # the reading holds only the CPUs in tftrain's affinity; an idle CPU outside it is not there
    before, after = reading(0, [10]), reading(1, [12], total=200)
    assert idle_cpus(before, after) == pytest.approx(0.02) and not decide(before, after).start


def test_a_cgroup_cpu_limit_caps_the_idle_time():
    # 16 idle CPUs on the host, but the run's cgroup may use 2 and uses 1.9 of them
    before = reading(0, [0] * 16, limits=[(2.0, 100.0)])
    after = reading(1, [100] * 16, total=200, limits=[(2.0, 101.9)])
    assert idle_cpus(before, after) == pytest.approx(0.1) and not decide(before, after).start
    after = reading(1, [100] * 16, total=200, limits=[(2.0, 100.5)])
    assert idle_cpus(before, after) == pytest.approx(1.5) and decide(before, after).start


def test_the_tightest_of_nested_limits_wins():
    before = reading(0, [0] * 8, limits=[(4.0, 0.0), (1.0, 0.0)])
    after = reading(1, [100] * 8, total=200, limits=[(4.0, 1.0), (1.0, 0.9)])
    assert idle_cpus(before, after) == pytest.approx(0.1)


def test_short_memory_holds_it_back():
    decision = decide(reading(0, [0, 0]), reading(1, [100, 100], total=200, memory=MEMORY_NEEDED // 4))
    assert not decision.start and "0.2 GB of memory available (it needs 1.0 GB)" in decision.why


def test_unknown_memory_does_not_hold_it_back():
    assert decide(reading(0, [0, 0], memory=None), reading(1, [100, 100], total=200, memory=None)).start


def test_counters_that_did_not_move_or_went_back_count_nothing():
    assert idle_cpus(reading(0, [10, 10]), reading(0, [10, 10])) == 0.0
    assert idle_cpus(reading(0, [50]), reading(1, [40], total=200)) == 0.0


def test_watch_starts_at_the_first_idle_window():
    readings = iter([reading(0, [0, 0]), reading(1, [1, 1], total=200), reading(2, [150, 2], total=300)])
    waited = []
    decision = watch(lambda: next(readings), lambda seconds: waited.append(seconds) or True)
    assert decision.start and waited == [1.0, 1.0]


def test_watch_that_the_training_ends_first_says_how_idle_it_got():
    readings = iter([reading(0, [0, 0]), reading(1, [30, 1], total=200), reading(2, [31, 2], total=300)])
    answers = iter([True, True, False])
    decision = watch(lambda: next(readings), lambda seconds: next(answers))
    assert not decision.start and decision.idle == pytest.approx(0.31)
    assert decision.why == "no CPU was idle while the training ran (at most 0.3 of 2 CPUs idle over 1.0 s; 2 readings)"


def test_watch_ended_before_any_window():
    decision = watch(lambda: reading(0, [0]), lambda seconds: False)
    assert not decision.start and decision.why == "the training ended before the machine was read"


PROC_STAT = """cpu  254788 37273 69420 160491 3603 0 1475 405 0 0
cpu0 116601 19880 32807 92628 1190 0 247 203 7 0
cpu1 138186 17392 36612 67863 2412 0 1228 201 0 0
cpu12 1 1 1 1 1 1 1 1 0 0
intr 4674490 0 0
ctxt 99
"""


def test_proc_stat_per_cpu_idle_and_total():
    assert parse_proc_stat(PROC_STAT, None) == {
        0: (92628 + 1190, 116601 + 19880 + 32807 + 92628 + 1190 + 0 + 247 + 203),
        1: (67863 + 2412, 138186 + 17392 + 36612 + 67863 + 2412 + 0 + 1228 + 201),
        12: (2, 8),
    }
    assert set(parse_proc_stat(PROC_STAT, {1, 5})) == {1}
    assert parse_proc_stat("cpu0 x y\ngarbage\n", None) == {}


@pytest.mark.parametrize(
    "v2, quota, period, cpus",
    [
        ("max 100000\n", None, None, None),
        ("150000 100000\n", None, None, 1.5),
        ("50000", None, None, 0.5),
        ("nonsense here", None, None, None),
        ("", None, None, None),
        (None, "-1\n", "100000\n", None),
        (None, "200000\n", "100000\n", 2.0),
        (None, "100000", "0", None),
        (None, None, None, None),
    ],
)
def test_cgroup_cpu_limits(v2, quota, period, cpus):
    assert parse_cpu_limit(v2, quota, period) == cpus


def test_meminfo_and_own_cgroups():
    assert parse_meminfo("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2048 * 1024
    assert parse_meminfo("MemTotal: 100 kB\n") is None
    text = "4:memory:/process_api/abc\n2:cpu,cpuacct:/job\n0::/user.slice/x.scope\n"
    assert parse_own_cgroups(text) == {
        "memory": "/process_api/abc",
        "cpu": "/job",
        "cpuacct": "/job",
        "": "/user.slice/x.scope",
    }


@pytest.mark.parametrize(
    "value, mode",
    [(None, GatePrestart.AUTO), ("", GatePrestart.AUTO), ("never", GatePrestart.NEVER), ("AUTO", GatePrestart.AUTO)],
)
def test_gate_prestart_setting(value, mode):
    assert resolve({} if value is None else {"TFTRAIN_GATE_PRESTART": value}).gate_prestart == mode


def test_gate_prestart_setting_that_does_not_parse_is_one_line():
    with pytest.raises(UsageError, match=r"^TFTRAIN_GATE_PRESTART must be auto or never, not 'sometimes'$"):
        resolve({"TFTRAIN_GATE_PRESTART": "sometimes"})


def _files(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_cgroup_v2_limits_from_tftrains_cgroup_up(tmp_path):
    _files(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory\n",
            "job/cpu.max": "max 100000\n",
            "job/cpu.stat": "usage_usec 5000000\nuser_usec 1\n",
            "job/run/cpu.max": "200000 100000\n",
            "job/run/cpu.stat": "usage_usec 3000000\n",
            "job/run/memory.max": str(4 * GB),
            "job/run/memory.current": str(3 * GB),
            "job/memory.max": "max\n",
            "job/memory.current": "1\n",
        },
    )
    machine = Machine(cpus={0}, root=tmp_path, own_cgroups="0::/job/run\n")
    assert machine.cpu_limits() == [(2.0, 3.0)]
    assert machine.memory() == GB  # the host's MemAvailable is more than the cgroup leaves here


def test_cgroup_v1_limits_in_a_co_mounted_hierarchy(tmp_path):
    _files(
        tmp_path,
        {
            "cpu,cpuacct/docker/c1/cpu.cfs_quota_us": "150000\n",
            "cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000\n",
            "cpu,cpuacct/docker/c1/cpuacct.usage": "2500000000\n",
            "cpu,cpuacct/docker/cpu.cfs_quota_us": "-1\n",
            "cpu,cpuacct/docker/cpu.cfs_period_us": "100000\n",
            "memory/docker/c1/memory.limit_in_bytes": str(1 << 62),
            "memory/docker/c1/memory.usage_in_bytes": "5\n",
        },
    )
    machine = Machine(cpus={0}, root=tmp_path, own_cgroups="4:memory:/docker/c1\n2:cpu,cpuacct:/docker/c1\n0::/\n")
    assert machine.cpu_limits() == [(1.5, 2.5)]
    assert machine.memory() is None or machine.memory() > 0  # no memory limit: the host's MemAvailable


def test_no_cgroup_files_is_no_limit(tmp_path):
    assert Machine(cpus={0}, root=tmp_path, own_cgroups="").cpu_limits() == []
