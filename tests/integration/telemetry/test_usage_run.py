"""A real run's usage on the local target: the allocation, the CPU its cgroup used, rank 0's peak
memory, the cost at compute.cost; shown by `tftrain runs`, `runs show --json` and summary.md."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

MIB = 1 << 20
SCRIPT = """\
import time
held = b"x" * (80 << 20)  # written, so resident
while time.process_time() < 1.0:  # busy for a second of CPU (however many others share it): the cgroup counts it
    pass
time.sleep(1.5)
print("accuracy: 0.5", flush=True)
"""
MANIFEST = """\
compute:
  cost: {gpu_hour: 99.0, cpu_hour: 3600.0, currency: EUR}
metrics:
  regex: {accuracy: 'accuracy: ([0-9.]+)'}
"""


def test_a_run_records_what_it_used_and_cost(project, cli, home):
    result = cli("run", "-f", str(project(script=SCRIPT, manifest=MANIFEST)))
    assert result.returncode == 0, result.stderr
    shown = cli("runs", "show", "demo-1", "--json")
    assert shown.returncode == 0, shown.stderr
    usage = json.loads(shown.stdout)["usage"]
    assert usage == json.loads((home / "runs" / "demo-1" / "run.json").read_text())["usage"]
    assert usage["processes"] == 1 and usage["gpu_processes"] == 0 and usage["gpu_seconds"] == 0.0
    assert 2.5 <= usage["wall_seconds"] < 120 and usage["cpu_seconds"] == usage["wall_seconds"]
    assert "gpus" not in usage  # no GPU here: no GPU block, and no error
    assert usage["cpu_seconds_used"] >= 1.0  # the busy loop, counted by the run's cgroup
    assert 80 * MIB <= usage["peak_rss_bytes"]["0"] < 1024 * MIB
    assert usage["prices"] == {"gpu_hour": 99.0, "cpu_hour": 3600.0, "currency": "EUR"}
    assert usage["cost"] == pytest.approx(usage["cpu_seconds"])  # 3600 an hour: one a CPU-second
    assert "usage: 0 GPU-hours" in result.stdout

    listing = cli("runs").stdout
    assert "GPU-hours" in listing and "demo-1" in listing
    summary = (home / "runs" / "demo-1" / "summary.md").read_text()
    assert "| GPU-hours (allocated) | 0 |" in summary and "| rank 0 peak memory |" in summary
    assert f"| cost | {usage['cost']:,.2f} EUR (GPU-hour 99, CPU-hour 3600) |" in summary
