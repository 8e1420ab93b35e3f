"""Throughput and memory of the log pump that every launcher uses.

4 producer processes print 1M lines in total. Baseline: the same producers writing straight to
files. Measured: the producers' output drained by tftrain's LogPump (rank logs on disk, console
to /dev/null, the Keras/regex metric parser on rank 0), in the same process. Prints lines/s,
the ratio to the baseline, and the pump's peak RSS. Goals: ≥ 200k lines/s, ≤ 100 MB.

    .venv/bin/python bench/logs.py
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner.logger import Logger
from runner.logpump import LogPump
from runner.metrics.parsers import LogMetricParser
from runner.processes import spawn

PRODUCER = str(Path(__file__).resolve().parent / "workloads" / "produce_lines.py")


def baseline(total: int, producers: int, directory: Path) -> float:
    started = time.perf_counter()
    handles = [(directory / f"raw-{i}.log").open("wb") for i in range(producers)]
    processes = [
        subprocess.Popen([sys.executable, PRODUCER, str(total // producers), f"p{i}"], stdout=handle)
        for i, handle in enumerate(handles)
    ]
    for process in processes:
        process.wait()
    for handle in handles:
        handle.close()
    return time.perf_counter() - started


def pumped(total: int, producers: int, directory: Path) -> tuple[float, int]:
    with open("/dev/null", "w") as devnull:
        logger = Logger(devnull)
        pump = LogPump(logger, directory, prefix_ranks=True)
        parsed = [0]  # counted, not kept: a run's recorder writes points to disk, not memory
        parser = LogMetricParser({"loss": r"loss: ([0-9.]+)"}, lambda points: parsed.__setitem__(0, parsed[0] + len(points)))
        started = time.perf_counter()
        processes = []
        for rank in range(producers):
            process, fd = spawn([sys.executable, PRODUCER, str(total // producers), f"p{rank}"], directory, {})
            pump.add(rank, fd, parser.feed if rank == 0 else None)
            processes.append(process)
        for process in processes:
            process.wait()
        pump.join()
        logger.flush()
        elapsed = time.perf_counter() - started
    lines = sum(sum(1 for _ in (directory / f"{rank}.log").open("rb")) for rank in range(producers))
    assert lines == total, f"lost lines: {lines} of {total}"
    assert parsed[0] == total // producers, f"parsed {parsed[0]} metrics"
    return elapsed, lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline(args.lines, args.producers, Path(tmp))
        elapsed, lines = pumped(args.lines, args.producers, Path(tmp))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"baseline (producers → files): {args.lines / base:,.0f} lines/s ({base:.2f}s)")
    print(f"through the log pump:         {lines / elapsed:,.0f} lines/s ({elapsed:.2f}s)  (goal ≥ 200,000)")
    print(f"ratio pump/baseline: {base / elapsed:.3f}")
    print(f"peak RSS of the pump process: {rss_mb:.1f} MB  (goal ≤ 100; {rss_before:.1f} MB after imports)")


if __name__ == "__main__":
    main()
