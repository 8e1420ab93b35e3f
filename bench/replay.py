"""The replay's cost and its latency rule's calibration.

Cost (default): a gated, registered model (examples/keras-replay, trained and registered once by
`tftrain run` in a temporary TFTRAIN_HOME, never in the tree) is served twice as a replay serves it
(runner.serving.launch, both servers started once, outside the timing). Then, interleaved for
--rounds rounds: the replay's sending (each request to both versions at the same instant,
runner.replay.engine) against sending the same requests to one server alone with the same
concurrency (the reference). Printed: the medians and their ratio (goal ≤ 1.10), with the load, and
where the time goes: the CPU each side of the exchange spent per request (the client, this process;
each server with its children, from /proc), so that the ratio can be read against the machine's
cores — when the servers and the client need more CPU than the cores give in the reference's time,
no sending can keep the replay within 10 % of it.

Calibration (--calibrate): the rule "refuse when the 95 % lower bound of the p99 ratio passes
max_latency_ratio" (runner.replay.latency) applied to simulated replays: latencies lognormal with a
heavy tail (2 % of requests stalled by the machine, independently on each side), the candidate as
fast as the baseline (false alarms; goal ≤ 0.05) or its whole distribution really slower (power), for
200 and 1,000 requests.

    .venv/bin/python bench/replay.py [--rounds 5] [--requests 400] [--concurrency 4]
    .venv/bin/python bench/replay.py --calibrate [--trials 400]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from paired import at_least, interleaved, load  # noqa: E402


def calibrate(trials: int) -> None:
    from runner.replay.latency import p99_ratio

    rng = np.random.default_rng(7)

    def side(n: int, slower: float) -> np.ndarray:
        """A side's latencies, its whole distribution `slower` times the baseline's (so its true p99 is)."""
        seconds = rng.lognormal(np.log(0.006), 0.35, n)
        stalled = rng.random(n) < 0.02  # a request the machine stalls: the tail a p99 reads
        return (seconds + stalled * rng.exponential(0.02, n)) * slower

    print(
        f"calibration: {trials} simulated replays per row (lognormal latencies, 2 % of requests stalled on each side)"
    )
    print(
        f"{'requests':>9} {'true ratio':>10} {'threshold':>9} {'refused':>8}   (false alarm when the true ratio ≤"
        " threshold)"
    )
    for n in (200, 1000):
        for true, threshold in ((1.0, 1.5), (1.0, 1.2), (1.5, 1.5), (2.0, 1.5), (3.0, 1.5)):
            refused = sum(
                (r := p99_ratio(side(n, true), side(n, 1.0))) is not None and r.low > threshold for _ in range(trials)
            )
            share = refused / trials
            error = (share * (1 - share) / trials) ** 0.5
            print(f"{n:>9} {true:>10.1f} {threshold:>9.1f} {share:>8.3f} ± {error:.3f}")


def registered_home(scratch: Path) -> Path:
    """examples/keras-replay trained, gated, replayed and registered twice (v1 alone, v2 against v1)
    in a home of its own."""
    example = scratch / "example"
    shutil.copytree(
        REPO / "examples" / "keras-replay", example, ignore=shutil.ignore_patterns("outputs", "__pycache__")
    )
    home = scratch / "home"
    env = {**os.environ, "TFTRAIN_HOME": str(home)}
    for _ in range(2):
        done = subprocess.run(
            [str(REPO / ".venv" / "bin" / "tftrain"), "run", "-f", str(example / "tftrain.yml")],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            raise SystemExit(done.stdout[-2000:] + done.stderr)
    return home


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its children, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a process that ended meanwhile
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def metered(run, pids: list[int], spent: list[list[float]]):
    """`run`, appending to `spent` this process's CPU seconds and each of `pids`' for every call."""

    def call() -> None:
        before = [time.process_time()] + [cpu_seconds(pid) for pid in pids]
        run()
        after = [time.process_time()] + [cpu_seconds(pid) for pid in pids]
        spent.append([b - a for a, b in zip(before, after)])

    return call


def cost(rounds: int, count: int, concurrency: int) -> None:
    from contextlib import ExitStack

    from runner.replay.engine import ReplayOptions, _send_all, _start
    from runner.serving.records import read_requests
    from runner.serving.refs import checked_out
    from runner.telemetry.logger import Logger

    requests = (read_requests(REPO / "examples" / "keras-replay" / "replay" / "requests.jsonl") * (count // 200 + 1))[
        :count
    ]
    requests = [
        request.__class__(f"{request.id}-{i}", request.body, request.route) for i, request in enumerate(requests)
    ]
    with tempfile.TemporaryDirectory(prefix="tftrain-bench-replay-") as tmp, ExitStack() as stack:
        scratch = Path(tmp)
        home = registered_home(scratch)
        logger = Logger(open(os.devnull, "w"))
        served = []
        for version in ("v1", "v2"):
            (scratch / version).mkdir()
            served.append(
                stack.enter_context(checked_out(f"keras-replay@{version}", logger, None, scratch / version, home))
            )
        options = ReplayOptions(concurrency=concurrency)
        sides = _start(stack, served, options, logger, scratch / "logs")
        for side in sides:
            _send_all([side], requests[:50], options)  # warmed, not timed
        pids = [side.server.process.pid for side in sides]
        spent: dict[str, list[list[float]]] = {"one server alone": [], "replay (both)": []}
        seconds = interleaved(
            {
                "one server alone": metered(
                    lambda: _send_all(sides[:1], requests, options), pids, spent["one server alone"]
                ),
                "replay (both)": metered(lambda: _send_all(sides, requests, options), pids, spent["replay (both)"]),
            },
            rounds,
        )
    alone, both = (float(np.median(seconds[name])) for name in ("one server alone", "replay (both)"))
    ratios = [b / a for a, b in zip(seconds["one server alone"], seconds["replay (both)"])]
    print(json.dumps({"requests": count, "concurrency": concurrency, "rounds": rounds, "load": load()}))
    print(
        f"one server alone: {alone:.3f} s (median); replay to both: {both:.3f} s; "
        f"ratio {float(np.median(ratios)):.2f} (median of paired ratios; goal ≤ 1.10)"
    )
    cores = len(os.sched_getaffinity(0))
    for name, rows in spent.items():
        client, *servers = (float(np.median(column)) * 1000 / count for column in zip(*rows))
        wall = float(np.median(seconds[name])) * 1000 / count
        total = client + sum(servers)
        print(
            f"{name}: CPU per request {total:.2f} ms (client {client:.2f}, servers "
            f"{' + '.join(f'{one:.2f}' for one in servers)}), {wall:.2f} ms of wall a request: "
            f"{total / wall:.1f} of {cores} cores busy"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--rounds", type=at_least, default=5)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.trials)
    else:
        cost(args.rounds, args.requests, args.concurrency)


if __name__ == "__main__":
    main()
