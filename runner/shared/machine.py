"""This machine's CPUs and GPUs as tftrain may use them: the CPUs its affinity allows, the GPUs
`nvidia-smi` lists within CUDA_VISIBLE_DEVICES. The standard library only: the capacity check, a
sweep's GPU shares, the docker target and the usage sampler all read the machine through here."""

from __future__ import annotations

import os
import subprocess


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_count(cuda_visible_devices: str | None) -> int | None:
    """GPUs this machine lets tftrain use (`nvidia-smi -L`, within `cuda_visible_devices`: tftrain's
    CUDA_VISIBLE_DEVICES, as runner.settings read it); None: unknown."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    count = sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    named = named_gpus(cuda_visible_devices)
    return count if named is None else min(count, len(named))


def named_gpus(cuda_visible_devices: str | None) -> list[str] | None:
    """The GPUs CUDA_VISIBLE_DEVICES lets a process use, as it names them (indices or UUIDs): its
    entries up to the first one CUDA ignores the rest from (-1, an empty one, one named twice —
    never counted twice, so two trials never get the same GPU); None when it is unset or empty,
    which leaves every GPU visible."""
    if cuda_visible_devices is None or not cuda_visible_devices.strip():
        return None
    named: list[str] = []
    for item in (part.strip() for part in cuda_visible_devices.split(",")):
        if not item or item.startswith("-") or item in named:
            break
        named.append(item)
    return named
