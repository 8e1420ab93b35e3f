"""What bench/gpu.py reads of the GPU beside tftrain: whether there is one (nvidia-smi), nvidia-smi's
own sampling while a run trains, and what the run recorded of it (run.json's usage.gpus)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from pathlib import Path
from typing import NamedTuple

QUERY = ("--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits")
INTERVAL_MS = 500


def missing_gpu() -> str | None:
    """Why this machine has no NVIDIA GPU to measure, or None where nvidia-smi lists one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found"
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi -L failed: {exc}"
    if listed.returncode != 0:
        return f"nvidia-smi -L: exit {listed.returncode}: {(listed.stderr or listed.stdout).strip()[:200]}"
    if not any(line.startswith("GPU ") for line in listed.stdout.splitlines()):
        return "nvidia-smi -L lists no GPU"
    return None


def gpu_names() -> list[str]:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    return [line.strip() for line in listed.stdout.splitlines() if line.startswith("GPU ")]


class GpuReading(NamedTuple):
    """One GPU over one run: the mean utilisation (%), the peak memory (MiB), how many samples."""

    utilization_mean: float
    memory_peak_mib: float
    samples: int


class SmiSampler:
    """`nvidia-smi … -lms 500` in the background for as long as the block runs; its rows to a file."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> SmiSampler:
        with self.output.open("w") as sink:
            self.process = subprocess.Popen(
                ["nvidia-smi", *QUERY, "-lms", str(INTERVAL_MS)], stdout=sink, stderr=subprocess.DEVNULL
            )
        return self

    def __exit__(self, *exc) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def readings(self) -> dict[int, GpuReading]:
        """Per GPU index; rows that are not three numbers (a [N/A], a row cut off at terminate) are left out."""
        rows: dict[int, list[tuple[float, float]]] = {}
        for line in self.output.read_text(errors="replace").splitlines():
            fields = [field.strip() for field in line.split(",")]
            try:
                index, utilization, memory = int(fields[0]), float(fields[1]), float(fields[2])
            except (ValueError, IndexError):
                continue
            rows.setdefault(index, []).append((utilization, memory))
        return {
            index: GpuReading(statistics.fmean(u for u, _ in samples), max(m for _, m in samples), len(samples))
            for index, samples in rows.items()
        }


def recorded_gpus(run_dir: Path) -> dict[int, GpuReading]:
    """run.json's usage.gpus (tftrain's NVML sampling), in the same units; {} where it has none."""
    usage = json.loads((run_dir / "run.json").read_text()).get("usage") or {}
    return {
        int(gpu["index"]): GpuReading(
            float(gpu["utilization_mean"]), int(gpu["memory_peak_bytes"]) / 2**20, int(gpu["samples"])
        )
        for gpu in usage.get("gpus") or []
    }


def side_by_side(recorded: dict[int, GpuReading], sampled: dict[int, GpuReading]) -> str:
    """One line per GPU tftrain recorded (or nvidia-smi saw): tftrain's figure beside nvidia-smi's."""

    def shown(reading: GpuReading | None) -> str:
        if reading is None:
            return "none"
        return f"{reading.utilization_mean:5.1f}% {reading.memory_peak_mib:8.0f} MiB peak ({reading.samples} samples)"

    indexes = sorted(set(recorded) | set(sampled))
    if not indexes:
        return "no GPU readings (tftrain recorded none, nvidia-smi sampled none)"
    return "; ".join(
        f"gpu{index}: tftrain {shown(recorded.get(index))} | nvidia-smi {shown(sampled.get(index))}"
        for index in indexes
    )
