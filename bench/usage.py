"""What measuring a run's usage costs the training: the same Keras training timed bare and with the
usage sampler running beside it (rank memory from /proc and the CPU time of its cgroup every 1 s,
the GPUs every 5 s), alternating, in one process; the ratio of medians. Also at 100× the rate, as
an upper bound. Goal: ≤ 1.01 at the real rates.

NVML is the real one where there is a GPU; elsewhere tests/fake_nvml.py stands in (the calls cost
what a Python function costs, not what the driver costs: say which in the figures).

    .venv/bin/python bench/usage.py            # 12 epochs, 3 rounds of each
    .venv/bin/python bench/usage.py --epochs 40 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from runner.targets.local import cgroup as cgroups  # noqa: E402
from runner.telemetry.usage_sampler import GpuMonitor, UsageSampler  # noqa: E402


def nvml():
    """The real pynvml when it finds a GPU, else the fake; and which it is."""
    real = GpuMonitor.open()
    if real is not None:
        real.close()
        return None, "real NVML"
    from fake_nvml import fake_nvml

    return fake_nvml(), "fake NVML (no GPU here)"


def train(argv: list[str], sample: tuple[float, float] | None, fake) -> tuple[float, int]:
    """Seconds the training took, and how many points the sampler recorded."""
    points: list = []
    env = {**os.environ, "TFTRAIN_RANK": "0"}  # as the launchers hand it: the sampler tells ranks by it
    child = subprocess.Popen(
        argv, cwd=HERE / "workloads", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    started = time.perf_counter()
    cgroup, _ = cgroups.create(f"usage-bench.{child.pid}") if sample else (None, "")
    try:
        if cgroup is not None:
            (cgroup.path / "cgroup.procs").write_text(str(child.pid))
        if sample is None:
            child.wait()
        else:
            gpus = GpuMonitor.open(fake)
            sampler = UsageSampler(
                points.extend,
                gpus,
                (lambda: cgroup) if cgroup else None,
                gpu_interval=sample[0],
                memory_interval=sample[1],
            )
            with sampler:
                child.wait()
            assert cgroup is None or sampler.memory.peaks, "the sampler saw the training"
    finally:
        if cgroup is not None:
            cgroup.remove()
    return time.perf_counter() - started, len(points)


def tick_costs(fake, ticks: int = 500) -> tuple[float, float]:
    """CPU seconds of one memory tick (a rank in a cgroup: its pids, environ, status, cpu.stat) and
    one GPU tick, timed on a sleeping rank: what the sampler takes from the training's CPUs,
    free of the noise a shared machine puts into whole trainings."""
    child = subprocess.Popen(["sleep", "60"], env={**os.environ, "TFTRAIN_RANK": "0"})
    cgroup, _ = cgroups.create(f"usage-bench.{child.pid}")
    try:
        (cgroup.path / "cgroup.procs").write_text(str(child.pid))
        gpus = GpuMonitor.open(fake)
        sampler = UsageSampler(lambda points: None, gpus, lambda: cgroup)
        started = time.thread_time()
        for _ in range(ticks):
            sampler._sample_processes()
        memory = (time.thread_time() - started) / ticks
        started = time.thread_time()
        for _ in range(ticks):
            sampler._sample_gpus(time.monotonic())
        gpu = (time.thread_time() - started) / ticks
        assert sampler.memory.peaks and gpus.samples == ticks
        gpus.close()
    finally:
        child.kill()
        child.wait()
        cgroup.remove()
    return memory, gpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fake, which = nvml()
    argv = [sys.executable, "cpu_train.py", "--epochs", str(args.epochs)]
    env_note = f"{os.cpu_count()} CPUs, {which}"
    modes = {"bare": None, "sampled (5 s / 1 s)": (5.0, 1.0), "sampled ×100 (0.05 s / 0.01 s)": (0.05, 0.01)}
    times: dict[str, list[float]] = {name: [] for name in modes}
    for round_no in range(args.rounds):
        line = []
        for name, rate in modes.items():
            seconds, points = train(argv, rate, fake)
            times[name].append(seconds)
            line.append(f"{name} {seconds:.2f}s" + (f" ({points} points)" if rate else ""))
        print(f"round {round_no + 1}: " + "  ".join(line), flush=True)
    bare = statistics.median(times["bare"])
    print(f"{env_note}; median bare {bare:.2f}s")
    memory, gpu = tick_costs(fake)
    share = memory / 1.0 + gpu / 5.0  # CPU seconds per second of training at the real rates
    print(
        f"one memory tick {memory * 1e6:.0f} µs, one GPU tick {gpu * 1e6:.0f} µs of CPU: {share * 100:.4f} % of one"
        f" core at the real rates (ratio {1 + share / (os.cpu_count() or 1):.5f} on a training using all"
        f" {os.cpu_count()} CPUs)"
    )
    for name in list(modes)[1:]:
        median = statistics.median(times[name])
        print(
            f"{name}: median {median:.2f}s, ratio {median / bare:.3f}"
            + (" (goal ≤ 1.01)" if "×100" not in name else "")
        )


if __name__ == "__main__":
    main()
