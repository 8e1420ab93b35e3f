"""A served model under load, for the serving benches: `tftrain serve` started and waited for, and
keep-alive clients sending one-row predicts (requests/s and latencies)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from serving_models import NAME

TFTRAIN = str(Path(sys.executable).parent / "tftrain")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def load(
    port: int,
    concurrency: int,
    seconds: float,
    path: str = f"/v1/models/{NAME}:predict",
    body: str = json.dumps({"instances": [[0.5] * 64]}),
) -> tuple[float, list[float]]:
    """(requests/s, latencies) of `concurrency` keep-alive clients sending one-row predicts."""
    headers = {"Content-Type": "application/json"}
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    start = threading.Barrier(concurrency + 1)

    def client(mine: list[float]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start.wait()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(str(response.status))
            mine.append(time.perf_counter() - started)
        connection.close()

    threads = [threading.Thread(target=client, args=(mine,)) for mine in latencies]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise SystemExit(f"{len(errors)} requests failed (HTTP {errors[0]})")
    every = [value for mine in latencies for value in mine]
    return len(every) / elapsed, every


def start_server(home: Path, port: int, batch: bool, name: str = NAME, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    process = subprocess.Popen(
        [TFTRAIN, "serve", f"{name}@v1", "--port", str(port), *(["--batch"] if batch else []), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TFTRAIN_HOME": str(home)},
    )
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        tail = [*tail[-30:], line]
        if "is ready:" in line:
            # keep the pipe drained, in large reads: a line at a time would take the GIL from the bench's clients
            threading.Thread(
                target=lambda: [None for _ in iter(lambda: process.stdout.buffer.read1(1 << 20), b"")], daemon=True
            ).start()
            return process
    raise SystemExit("tftrain serve stopped before it was ready:\n" + "".join(tail))
