"""How fast `tftrain serve` answers: requests/s and p50/p99 latency of a one-row
TensorFlow Serving predict at concurrency 1 and 8 (keep-alive http.client connections, one thread
each), against calling the same SavedModel in-process (its signature, in the serving environment's
Python) in the same run. Printed as numbers and ratios against the goals, never asserted:
≥ 1,000 req/s at c=8, p99 ≤ 25 ms, the server adding ≤ 2 ms to p50.

    .venv/bin/python bench/serve.py [--seconds S] [--batch]
    .venv/bin/python bench/serve.py --oversize
    .venv/bin/python bench/serve.py --scoring
    .venv/bin/python bench/serve.py --record [--rounds 5] [--seconds S]   (bench/serve_record.py)

--scoring: a scoring script (Azure's init/run, bench/scoring.py) on azmlinfsrv instead of KServe:
POST /score {"data": [[64 values]]} at c=1 and c=8, against the same script's run() called in-process
on the same sample (ratio printed). No goal: Azure's server is gunicorn with one sync worker.

--scoring --pairs N: the three ways of serving the script side by side, all started at once: plain
azmlinfsrv (as Azure starts it), tftrain's scoring server alone (guard and front; its output
discarded) and `tftrain serve` (which relays the server's log lines); N rounds of POST /score at c=1
and c=8, the three interleaved (the order rotated each round); medians and their ratios to plain
azmlinfsrv. The machine's load is printed beside them: on a shared machine the figures are indicative.

--oversize: the request-size limit instead. A 200 MB body, declared (Content-Length) and chunked,
is refused (413); a valid 40 MB batch (within the 64 MiB limit) is answered. For each: the
server's RSS before and after (goal ≤ +50 MB after the refused one) and /v2/health/ready's latency
polled meanwhile (goal ≤ 100 ms).

The serving environment is the one `tftrain serve` builds (TFTRAIN_CACHE_DIR; minutes the first
time); the model is a small Keras SavedModel (64 → 32 → 10) registered in a temporary TFTRAIN_HOME.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from served import load, percentile, start_server  # noqa: E402
from serving_models import BUILD, NAME, BuiltModel, register_version  # noqa: E402  (tests/ holds the model)

GOAL_RPS_C8 = 1000
GOAL_P99_MS = 25.0
GOAL_ADDED_P50_MS = 2.0
GOAL_RSS_GROWTH_MB = 50
GOAL_HEALTH_MS = 100.0
HUGE_BODY = 200_000_000
VALID_ROWS = 60_000  # ×64 values of ~10 characters: a ~40 MB valid batch
IN_PROCESS = """
import sys, time, json
import numpy as np, tensorflow as tf
fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
row = tf.constant(np.full((1, 64), 0.5, np.float32))
for _ in range(200): fn(features=row)
times, end = [], time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    started = time.perf_counter(); fn(features=row)["output_0"].numpy(); times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc (MB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for {pid}")


def server_pid(tftrain: subprocess.Popen) -> int:
    """The model server: the child of `tftrain serve`."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (
                    int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == tftrain.pid
                    and b"runner.serving.server" in (entry / "cmdline").read_bytes()
                ):  # not the lifeline's watcher
                    return int(entry.name)
            except (OSError, IndexError, ValueError):
                continue
    raise SystemExit("the model server is not running")


def health_during(port: int, work) -> tuple[object, list[float]]:
    """work()'s result and the latencies of /v2/health/ready polled every 10 ms while it ran."""
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            started = time.perf_counter()
            connection.request("GET", "/v2/health/ready")
            connection.getresponse().read()
            latencies.append(time.perf_counter() - started)
            connection.close()
            time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        result = work()
    finally:
        done.set()
        poller.join(60)
    return result, latencies


def send_huge(port: int, chunked: bool) -> str:
    """The status line answering a 200 MB body: declared (headers first, the answer awaited) or
    chunked (sent until the server answers or closes)."""
    client = socket.create_connection(("127.0.0.1", port), timeout=60)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUGE_BODY}"
    client.sendall(
        f"POST /v1/models/{NAME}:predict HTTP/1.1\r\nHost: bench\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n".encode()
    )
    answer: list[bytes] = []
    reader = threading.Thread(target=lambda: answer.append(client.recv(4096)))
    reader.start()
    piece = b"[" + b"0.5," * 65535 + b"\n"
    sent = 0
    try:
        while chunked and sent < HUGE_BODY and reader.is_alive():
            client.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
    except OSError:  # the server answered and closed: the rest is not read
        pass
    reader.join(60)
    client.close()
    return answer[0].split(b"\r\n", 1)[0].decode() if answer else "no answer"


def send_valid_batch(port: int, body: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request("POST", f"/v1/models/{NAME}:predict", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return f"HTTP {response.status} ({len(body) / 1e6:.0f} MB body)"


def oversize(port: int, pid: int) -> None:
    """Print RSS and health latency around each large body."""
    body = json.dumps(
        {"instances": [[0.123456789] * 64] * VALID_ROWS}
    )  # made before the clock: dumps holds the bench's GIL
    cases = (
        ("200 MB declared", lambda: send_huge(port, False)),
        ("200 MB chunked", lambda: send_huge(port, True)),
        ("valid batch", lambda: send_valid_batch(port, body)),
    )
    for label, work in cases:
        before = rss_mb(pid)
        status, latencies = health_during(port, work)
        time.sleep(1.0)
        after = rss_mb(pid)
        worst = max(latencies) * 1000 if latencies else float("nan")
        print(
            f"{label}: {status}; RSS {before:.0f} → {after:.0f} MB ({after - before:+.0f}, goal ≤"
            f" +{GOAL_RSS_GROWTH_MB}); health max {worst:.1f} ms over {len(latencies)} probes (goal ≤"
            f" {GOAL_HEALTH_MS:g})"
        )


def scoring(model, home: Path, seconds: float) -> None:
    """bench/scoring.py's version served by `tftrain serve`, against its run() in-process."""
    from scoring import SAMPLE, in_process, register_scoring_version

    name = "bench-scoring"
    register_scoring_version(home, model, name)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server(home, port, False, name)
    try:
        direct = in_process(model, home / "models" / name / "v1", name, seconds / 2)
        load(port, 1, 1.0, "/score", SAMPLE)  # warm-up
        single_rps, single = load(port, 1, seconds, "/score", SAMPLE)
        eight_rps, eight = load(port, 8, seconds, "/score", SAMPLE)
    finally:
        server.terminate()
        server.wait(60)
    ms = 1000.0
    direct_p50 = percentile(direct, 0.5) * ms
    print(
        f"in-process run() of the scoring script: p50 {direct_p50:.2f} ms, p99 {percentile(direct, 0.99) * ms:.2f} ms "
        f"({len(direct)} calls, {len(direct) / sum(direct):.0f} calls/s)"
    )
    for label, rps, latencies in (("c=1", single_rps, single), ("c=8", eight_rps, eight)):
        p50 = percentile(latencies, 0.5) * ms
        print(
            f"tftrain serve (azmlinfsrv) {label}: {rps:7.0f} req/s, p50 {p50:.2f} ms ({p50 / direct_p50:.1f}×"
            f" in-process), p99 {percentile(latencies, 0.99) * ms:.2f} ms; {rps / (len(direct) / sum(direct)):.2f}×"
            " in-process calls/s"
        )
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (client and server share them)")


def ready(port: int, process: subprocess.Popen, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a server exited ({process.returncode}) before it was ready")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("a server was not ready in time")


def scoring_pairs(model, home: Path, seconds: float, rounds: int) -> None:
    """Plain azmlinfsrv, tftrain's scoring server alone and `tftrain serve`, interleaved; medians, ratios."""
    from statistics import median

    from scoring import SAMPLE, register_scoring_version, start_direct, start_plain

    name = "bench-scoring"
    register_scoring_version(home, model, name)
    version_dir = home / "models" / name / "v1"
    ports = []
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    served = (
        ports[2],
        start_server(home, ports[2], False, name),
    )  # first: it builds the scoring environment the others use
    servers = {"plain azmlinfsrv": (ports[0], start_plain(model, version_dir, name, ports[0]))}
    servers["scoring server alone"] = (ports[1], start_direct(model, version_dir, name, ports[1]))
    servers["tftrain serve"] = served
    figures: dict[str, dict[int, list[float]]] = {label: {1: [], 8: []} for label in servers}
    loads = []
    try:
        for port, process in servers.values():
            ready(port, process)
            load(port, 1, 1.0, "/score", SAMPLE)  # warm-up
        labels = list(servers)
        for number in range(rounds):
            order = labels[number % 3 :] + labels[: number % 3]
            for concurrency in (1, 8):
                for label in order:
                    figures[label][concurrency].append(
                        load(servers[label][0], concurrency, seconds, "/score", SAMPLE)[0]
                    )
            loads.append(os.getloadavg()[0])
    finally:
        for _, process in servers.values():
            process.terminate()
            process.wait(60)
    base = {c: median(figures["plain azmlinfsrv"][c]) for c in (1, 8)}
    for label, by_concurrency in figures.items():
        print(
            f"{label:22s} "
            + "; ".join(
                f"c={c}: median {median(values):6.0f} req/s ({median(values) / base[c]:.2f}× plain) of"
                f" {', '.join(f'{v:.0f}' for v in values)}"
                for c, values in by_concurrency.items()
            )
        )
    print(
        f"machine: {os.cpu_count()} cores, load average {min(loads):.1f}–{max(loads):.1f} over the rounds (client and"
        " servers share them)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="each measurement (default 8)")
    parser.add_argument(
        "--batch", action="store_true", help="serve with --batch (requests that meet are one model call)"
    )
    parser.add_argument(
        "--oversize", action="store_true", help="measure the request-size limit (RSS, health latency) instead"
    )
    parser.add_argument(
        "--scoring", action="store_true", help="a scoring script on azmlinfsrv (POST /score) instead of KServe"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="with --scoring: N interleaved rounds of plain azmlinfsrv, the server alone, tftrain serve",
    )
    parser.add_argument(
        "--record", action="store_true", help="req/s at c=8 recording every request (--record) against not recording"
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --record: interleaved rounds (at least 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tftrain-bench-serve-") as tmp:
        root = Path(tmp) / "model"
        root.mkdir()
        built = subprocess.run(
            [sys.executable, "-c", BUILD, str(root)],
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        if built.returncode != 0:
            raise SystemExit(built.stderr[-2000:])
        model = BuiltModel(root, json.loads(built.stdout.strip().splitlines()[-1])["tensorflow"])
        if args.scoring and args.pairs:
            scoring_pairs(model, Path(tmp) / "home", args.seconds, args.pairs)
            return
        if args.scoring:
            scoring(model, Path(tmp) / "home", args.seconds)
            return
        register_version(Path(tmp) / "home", model)
        if args.record:
            from serve_record import recording

            recording(Path(tmp), args.seconds, args.rounds)
            return
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = start_server(Path(tmp) / "home", port, args.batch)
        if args.oversize:
            try:
                oversize(port, server_pid(server))
            finally:
                server.terminate()
                server.wait(60)
            return
        try:
            from runner.environments import serving_spec

            python = serving_spec(model.tensorflow, onnx=False).python_path()
            inproc = subprocess.run(
                [python, "-c", IN_PROCESS, str(model.saved_model), str(args.seconds / 2)],
                capture_output=True,
                text=True,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
                check=True,
            )
            direct = json.loads(inproc.stdout.strip().splitlines()[-1])
            load(port, 1, 1.0)  # warm-up
            single_rps, single = load(port, 1, args.seconds)
            eight_rps, eight = load(port, 8, args.seconds)
        finally:
            server.terminate()
            server.wait(60)
    ms = 1000.0
    direct_p50 = percentile(direct, 0.5) * ms
    print(
        f"in-process SavedModel call: p50 {direct_p50:.2f} ms, p99 {percentile(direct, 0.99) * ms:.2f} ms"
        f" ({len(direct)} calls)"
    )
    for label, rps, latencies in (("c=1", single_rps, single), ("c=8", eight_rps, eight)):
        print(
            f"tftrain serve{' --batch' if args.batch else ''} {label}: {rps:7.0f} req/s, p50"
            f" {percentile(latencies, 0.5) * ms:.2f} ms, p99 {percentile(latencies, 0.99) * ms:.2f} ms"
        )
    added = percentile(single, 0.5) * ms - direct_p50
    p99 = percentile(eight, 0.99) * ms
    print(f"goal ≥ {GOAL_RPS_C8} req/s at c=8: {eight_rps:.0f} ({eight_rps / GOAL_RPS_C8:.2f}× the goal)")
    print(f"goal p99 ≤ {GOAL_P99_MS:g} ms at c=8: {p99:.1f} ms ({p99 / GOAL_P99_MS:.2f}× the limit)")
    print(
        f"goal server adds ≤ {GOAL_ADDED_P50_MS:g} ms to p50 (c=1 over in-process): {added:.2f} ms"
        f" ({added / GOAL_ADDED_P50_MS:.2f}× the limit)"
    )
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (client and server share them)")


if __name__ == "__main__":
    main()
