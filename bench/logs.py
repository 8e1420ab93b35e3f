"""Throughput and memory of the log pump that every launcher uses, and of the metrics behind it.

Cases, each measured in a child process of its own (wall time, and its peak RSS from wait4):

- pump: 4 producer processes print 1M lines in total, drained by tftrain's LogPump (rank logs
  on disk, console to /dev/null, the Keras/regex parser on rank 0, points counted). Baseline:
  the same producers writing straight to files. Goals: ≥ 200k lines/s, ≤ 100 MB.
- metrics flood: one producer prints 1M lines, every one of them matched by a metrics regex; the
  points go through a real MetricsRecorder (metrics.jsonl, the summary, the curves), as in a
  run. Compared with the same lines and no regex. Goal: ≤ 100 MB whatever the number of points.

    .venv/bin/python bench/logs.py [--lines N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner.manifest.model import MetricsSpec
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LogPump
from runner.telemetry.parsers import LogMetricParser
from runner.telemetry.recorder import MetricsRecorder
from runner.telemetry.report import curves

PRODUCER = str(Path(__file__).resolve().parent / "workloads" / "produce_lines.py")
LOSS = r"loss: ([0-9.]+)"


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


def spawn(argv: list[str], cwd: Path) -> tuple[subprocess.Popen, int]:
    """A producer writing into a pipe; the read end is the pump's."""
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(argv, cwd=cwd, stdout=write_fd, stderr=write_fd)
    os.close(write_fd)
    return process, read_fd


def _drain(total: int, producers: int, directory: Path, sink) -> tuple[float, int]:
    """Producers → LogPump (rank 0's lines to `sink`); (seconds, lines in the rank logs)."""
    with open("/dev/null", "w") as devnull:
        logger = Logger(devnull)
        pump = LogPump(logger, directory, prefix_ranks=producers > 1)
        started = time.perf_counter()
        processes = []
        for rank in range(producers):
            process, fd = spawn([sys.executable, PRODUCER, str(total // producers), f"p{rank}"], directory)
            pump.add(rank, fd, sink if rank == 0 else None)
            processes.append(process)
        for process in processes:
            process.wait()
        pump.join()
        logger.flush()
        elapsed = time.perf_counter() - started
    lines = sum(sum(1 for _ in (directory / f"{rank}.log").open("rb")) for rank in range(producers))
    assert lines == total, f"lost lines: {lines} of {total}"
    return elapsed, lines


def case_pump(total: int, producers: int, directory: Path) -> dict:
    parsed = [0]  # counted, not kept
    parser = LogMetricParser({"loss": LOSS}, lambda points: parsed.__setitem__(0, parsed[0] + len(points)))
    elapsed, lines = _drain(total, producers, directory, parser.feed)
    assert parsed[0] == total // producers, f"parsed {parsed[0]} metrics"
    return {"elapsed": elapsed, "lines": lines}


def case_metrics(total: int, regex: bool, directory: Path) -> dict:
    """One producer; with `regex`, every line is a point for a real recorder, as in a run."""
    spec = MetricsSpec(regex={"loss": LOSS} if regex else {})
    started = time.perf_counter()
    recorder = MetricsRecorder(directory / "metrics.jsonl", spec, lambda points: None)
    parser = LogMetricParser(spec.regex, recorder.record)
    _drain(total, 1, directory, parser.feed)
    samples = recorder.close()
    summary = recorder.as_dict()
    drawn = curves(samples, summary)
    elapsed = time.perf_counter() - started
    count = summary["metrics"].get("loss", {}).get("count", 0)
    assert count == (total if regex else 0), f"recorded {count} points"
    assert not regex or drawn, "no curve drawn"
    return {"elapsed": elapsed, "lines": total, "points": count}


def measure(case: str, lines: int, producers: int, directory: Path) -> dict:
    """Run one case in a child process: its result, and the child's peak RSS in MB."""
    work = directory / case
    work.mkdir()
    argv = [sys.executable, __file__, "--case", case, "--lines", str(lines), "--producers", str(producers)]
    argv += ["--dir", str(work)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"case {case} failed (exit {child.returncode})")
    return {**json.loads(out), "rss_mb": usage.ru_maxrss / 1024}


def run_case(case: str, lines: int, producers: int, directory: Path) -> dict:
    if case == "pump":
        return case_pump(lines, producers, directory)
    return case_metrics(lines, case == "regex", directory)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--case", choices=("pump", "plain", "regex"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # a child: one case, its result as JSON
        print(json.dumps(run_case(args.case, args.lines, args.producers, args.dir)))
        return
    imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline(args.lines, args.producers, Path(tmp))
        pump = measure("pump", args.lines, args.producers, Path(tmp))
        plain = measure("plain", args.lines, 1, Path(tmp))
        regex = measure("regex", args.lines, 1, Path(tmp))
    print(f"baseline (producers → files): {args.lines / base:,.0f} lines/s ({base:.2f}s)")
    print(
        f"through the log pump:         {pump['lines'] / pump['elapsed']:,.0f} lines/s ({pump['elapsed']:.2f}s)  (goal"
        " ≥ 200,000)"
    )
    print(f"ratio pump/baseline: {base / pump['elapsed']:.3f}")
    print(f"peak RSS of the pump process: {pump['rss_mb']:.1f} MB  (goal ≤ 100; {imports:.1f} MB after imports)")
    lines = f"{args.lines:,} lines, 1 process"
    print(f"{lines}, no metrics regex:          {plain['elapsed']:.2f}s, peak RSS {plain['rss_mb']:.1f} MB")
    print(
        f"{lines}, a regex matching every line: {regex['elapsed']:.2f}s, peak RSS {regex['rss_mb']:.1f} MB"
        f"  ({regex['points']:,} points; goal ≤ 100 MB)"
    )
    time_ratio, rss_ratio = regex["elapsed"] / plain["elapsed"], regex["rss_mb"] / plain["rss_mb"]
    print(f"ratio regex/no regex: time {time_ratio:.2f}, RSS {rss_ratio:.2f}")


if __name__ == "__main__":
    main()
