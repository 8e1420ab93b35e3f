"""bench/serve.py --record: what recording costs a served model. Two `tftrain serve` of the same
registered version, one recording every request (`--record DIR`, sample 1), one not, both started
once; then --rounds interleaved rounds (the order rotating) of one-row predicts at c=8 against each.
Printed: each side's median req/s and p99, and the median of the rounds' ratios (goal: recording
costs ≤ 5 % of req/s, a ratio ≥ 0.95), with the load. The recording goes to a temporary directory."""

from __future__ import annotations

import os
import socket
import statistics
from pathlib import Path

from paired import load as machine_load
from served import load, percentile, start_server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def recording(tmp: Path, seconds: float, rounds: int) -> None:
    home, recorded = tmp / "home", tmp / "recorded"
    ports = {"not recording": free_port(), "recording": free_port()}
    servers = {
        "not recording": start_server(home, ports["not recording"], False),
        "recording": start_server(home, ports["recording"], False, extra=("--record", str(recorded))),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ports}
    try:
        for port in ports.values():
            load(port, 8, 1.0)  # warm-up
        names = list(ports)
        for number in range(max(rounds, 5)):
            for name in names[number % 2 :] + names[: number % 2]:
                rps, latencies = load(ports[name], 8, seconds)
                figures[name].append((rps, percentile(latencies, 0.99) * 1000))
            print(
                f"round {number + 1}: "
                + ", ".join(f"{name} {figures[name][-1][0]:.0f} req/s" for name in names)
                + f" (load {machine_load()})"
            )
    finally:
        for server in servers.values():
            server.terminate()
            server.wait(60)
    on_disk = sum(path.stat().st_size for path in recorded.iterdir()) if recorded.is_dir() else 0
    for name in names:
        print(
            f"{name:14s}: median {statistics.median(r for r, _ in figures[name]):.0f} req/s, p99"
            f" {statistics.median(p for _, p in figures[name]):.1f} ms"
        )
    ratio = statistics.median(a[0] / b[0] for a, b in zip(figures["recording"], figures["not recording"]))
    print(
        f"recording / not recording req/s at c=8: {ratio:.3f} (median of paired rounds; goal ≥ 0.95); "
        f"{on_disk / 1e6:.1f} MB recorded; {os.cpu_count()} cores, load {machine_load()}"
    )
