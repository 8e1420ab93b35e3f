"""Usage and cost, in words: the summary's usage table, the line that sets this run against the last
release ("+12 % GPU-hours for +0.4 % accuracy"), and a sweep's cost per trial and in total."""

from __future__ import annotations

import math

from runner.history.usage import Usage


def hours(value: float) -> str:
    return f"{value:.4g}" if value else "0"


def money(value: float | None, currency: str | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g} {currency}" if value < 1 else f"{value:,.2f} {currency}"


def size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.4g} {unit}" if unit != "B" else f"{value} B"
        value /= 1024
    return f"{value:.4g} TiB"


def cost_text(usage: Usage) -> str:
    return money(usage.cost, usage.prices.currency if usage.prices else None)


def brief(usage: Usage) -> str:
    """One line: `0.25 GPU-hours, 0.5 CPU-hours, 0.6500 USD (12.0 s)`."""
    parts = [f"{hours(usage.gpu_hours)} GPU-hours", f"{hours(usage.cpu_hours)} CPU-hours"]
    if usage.cost is not None:
        parts.append(cost_text(usage))
    return ", ".join(parts) + f" ({usage.wall_seconds:.1f} s)"


def usage_rows(usage: Usage) -> list[list[str]]:
    """(what, how much) for the console and the summary."""
    rows = [
        ["training wall time", f"{usage.wall_seconds:.1f} s"],
        ["processes", f"{usage.processes}" + (f" ({usage.gpu_processes} with a GPU)" if usage.gpu_processes else "")],
        ["GPU-hours (allocated)", hours(usage.gpu_hours)],
        ["CPU-hours (allocated)", hours(usage.cpu_hours)],
    ]
    if usage.cpu_seconds_used is not None:
        rows.append(["CPU time used", f"{usage.cpu_seconds_used:.1f} s"])
    if usage.prices is not None:
        rows.append(["cost", f"{cost_text(usage)} ({_priced_at(usage)})"])
    agreement = usage.allocation.agreement() if usage.allocation is not None else None
    if agreement is not None:
        rows.append(["Slurm accounting (sacct)", agreement])
    for gpu in usage.gpus or []:
        label = f"GPU {gpu.index}" + (f" ({gpu.name})" if gpu.name else "")
        total = f" of {size(gpu.memory_total_bytes)}" if gpu.memory_total_bytes else ""
        rows.append(
            [label, f"{gpu.utilization_mean:.0f} % busy on average, peak memory {size(gpu.memory_peak_bytes)}{total}"]
        )
    for rank, peak in sorted(usage.peak_rss_bytes.items(), key=lambda item: int(item[0]) if item[0].isdigit() else -1):
        rows.append([f"rank {rank} peak memory", size(peak)])
    return rows


def _priced_at(usage: Usage) -> str:
    prices, allocation = usage.prices, usage.allocation
    if prices.billing_hour is None:
        return f"GPU-hour {prices.gpu_hour:g}, CPU-hour {prices.cpu_hour:g}"
    if allocation is None or allocation.billing is None or allocation.elapsed_seconds is None:
        return "Slurm's accounting gave no billing units"
    return (
        f"Slurm billing: {allocation.billing} units × {hours(allocation.elapsed_seconds / 3600)} h"
        f" at {prices.billing_hour:g} a unit-hour"
    )


def usage_markdown(usage: Usage | None) -> str:
    if usage is None:
        return ""
    # a cell holds no pipe: a record's strings (a GPU's name, accounting's findings) are not the table's
    lines = ["| usage | |", "|---|---|"] + [
        f"| {what} | {value.replace('|', '/')} |" for what, value in usage_rows(usage)
    ]
    return "\n".join(lines) + "\n"


def _relative(now: float, then: float) -> float | None:
    if not (math.isfinite(now) and math.isfinite(then)) or then == 0:
        return None
    return (now - then) / abs(then) * 100


def _measure(mine: Usage, theirs: Usage) -> tuple[str, float, float]:
    """What the two runs are compared by: GPU-hours where either held a GPU, else the cost where
    both have one, else CPU-hours."""
    if mine.gpu_seconds or theirs.gpu_seconds:
        return "GPU-hours", mine.gpu_hours, theirs.gpu_hours
    if mine.cost is not None and theirs.cost is not None and _currency(mine) == _currency(theirs):
        return "cost", mine.cost, theirs.cost
    return "CPU-hours", mine.cpu_hours, theirs.cpu_hours


def _currency(usage: Usage) -> str | None:
    return usage.prices.currency if usage.prices else None


def change_line(mine: Usage | None, theirs: Usage | None, summary: dict, base: dict, tag: str) -> str:
    """`+12 % GPU-hours for +0.4 % accuracy against v3`; what is missing is said, not guessed."""
    if mine is None:
        return ""
    if theirs is None:
        return f"Usage: {brief(mine)}; {tag} recorded no usage to compare with.\n"
    name, now, then = _measure(mine, theirs)
    change = _relative(now, then)
    spent = f"{change:+.0f} % {name}" if change is not None else f"{name} {hours(now)} (was {hours(then)})"
    primary = summary.get("primary")
    gained = _metric_change(primary, summary, base)
    line = f"{spent} for {gained}" if gained else spent
    return f"Usage: {brief(mine)}. Against {tag}: {line}.\n"


def _metric_change(primary: str | None, summary: dict, base: dict) -> str | None:
    mine, theirs = _metric(summary, primary), _metric(base, primary)
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return None
    now, then = _float(mine.get("last")), _float(theirs.get("last"))
    if now is None or then is None:
        return None
    change = _relative(now, then)
    return f"{change:+.1f} % {primary}" if change is not None else f"{primary} {now:.4g} (was {then:.4g})"


def _metric(document, primary: str | None):
    """metrics.json's `metrics[primary]`; None where the file (a release's: another party's) has no such thing."""
    metrics = document.get("metrics") if primary and isinstance(document, dict) else None
    return metrics.get(primary) if isinstance(metrics, dict) else None


def _float(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def sweep_costs(trials: list[tuple[int, str | None, Usage | None]]) -> tuple[list[list[str]], list[str]]:
    """A sweep's trials' usage as table rows (trial, run, GPU-hours, CPU-hours, cost), and the total row."""
    rows, gpu, cpu, cost, currencies, priced = [], 0.0, 0.0, 0.0, set(), True
    for number, run_id, usage in trials:
        if usage is None:
            rows.append([str(number), run_id or "", "—", "—", "—"])
            continue
        gpu, cpu = gpu + usage.gpu_hours, cpu + usage.cpu_hours
        if usage.cost is None:
            priced = False
        else:
            cost += usage.cost
            currencies.add(_currency(usage))
        rows.append([str(number), run_id or "", hours(usage.gpu_hours), hours(usage.cpu_hours), cost_text(usage)])
    # no total across currencies (a trial priced in EUR, another in USD): it would be neither
    total = [
        "total",
        "",
        hours(gpu),
        hours(cpu),
        money(cost, currencies.pop()) if priced and len(currencies) == 1 else "—",
    ]
    return rows, total


def sweep_costs_markdown(trials: list[tuple[int, str | None, Usage | None]], noun: str = "trial") -> str:
    """`noun`: what the numbered runs are (a sweep's trials, an evaluation's seeds)."""
    if not trials:
        return ""
    rows, total = sweep_costs(trials)
    lines = [f"| {noun} | run | GPU-hours | CPU-hours | cost |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines.append("| " + " | ".join(["**total**", *total[1:]]) + " |")
    return "\n".join(lines) + "\n"
