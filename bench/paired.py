"""Interleaved, paired timing for the benches: every round runs each variant once, the order
rotating from round to round, so load that drifts over the minutes of a bench falls on all of them
alike; figures are medians of each round's ratio to the reference (bare Python), with the machine's
load beside them. Imported by the bench scripts (run as `python bench/NAME.py`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

MIN_ROUNDS = 5


def load() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` shows them."""
    with open("/proc/loadavg", encoding="ascii") as handle:
        return " ".join(handle.read().split()[:3])


def at_least(rounds: int) -> int:
    """argparse type: a count of rounds, at least MIN_ROUNDS (fewer pairs give no median worth reading)."""
    count = int(rounds)
    if count < MIN_ROUNDS:
        raise ValueError(f"at least {MIN_ROUNDS} rounds")
    return count


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def rotated(names: list[str], number: int) -> list[str]:
    """Round `number`'s order: it starts with variant number mod len(names)."""
    return names[number % len(names) :] + names[: number % len(names)]


def interleaved(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each variant in each round; round r starts with variant r mod len(variants)."""
    names = list(variants)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        for name in rotated(names, number):
            seconds[name].append(timed(variants[name]))
        shown = "  ".join(f"{name} {seconds[name][-1]:.2f}s" for name in names)
        print(f"round {number + 1}/{rounds}: {shown}  (load {load()})", flush=True)
    return seconds


def report(seconds: dict[str, list[float]], reference: str, per: int = 1, unit: str = "") -> None:
    """Each variant's median, and its median paired ratio and difference to `reference` (the same
    round's); `per`: the differences also divided by this count (trials), named `unit`."""
    base = seconds[reference]
    print(f"median {reference}: {statistics.median(base):.2f}s")
    for name, times in seconds.items():
        if name == reference:
            continue
        ratio = statistics.median(t / b for t, b in zip(times, base))
        added = statistics.median(t - b for t, b in zip(times, base))
        each = f", {added / per:+.3f}s per {unit}" if per > 1 else ""
        print(
            f"median {name}: {statistics.median(times):.2f}s; paired against {reference}: ratio {ratio:.3f}, added"
            f" {added:+.2f}s{each}"
        )
