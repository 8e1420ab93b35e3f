"""How an evaluation reads in the console, summary.md, the job summary, the model card and the
pull-request comment: the verdict line, one row per model (mean ± spread over seeds), and a small
strip plot of the per-seed values of both models on one axis."""

from __future__ import annotations

import statistics

PLOT_WIDTH = 48
MARK = "●"


def _spread(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def _value(value: float, binary: bool, points: bool = False) -> str:
    """A share (binary evidence) in percent, a difference of shares in points (pp)."""
    return (f"{value * 100:.2f} " + ("pp" if points else "%")) if binary else f"{value:.4g}"


def model_rows(block: dict) -> list[list[str]]:
    """[model, seeds, mean, spread over seeds] for the candidate and, when judged, the baseline."""
    verdict = block.get("verdict") or {}
    binary = _binary(block)
    sides = [("this run", [entry["mean"] for entry in block.get("seeds", [])])]
    if verdict.get("baseline"):
        sides.append((verdict.get("baseline_ref") or "baseline", list(verdict["baseline"].get("seed_means") or [])))
    rows = []
    for label, means in sides:
        if not means:
            rows.append([label, "0", "—", "—"])
            continue
        spread = _spread(means)
        rows.append(
            [
                label,
                str(len(means)),
                _value(statistics.fmean(means), binary),
                "—" if spread is None else "± " + _value(spread, binary, points=True),
            ]
        )
    return rows


def _binary(block: dict) -> bool:
    return bool((block.get("verdict") or {}).get("binary", block.get("binary", False)))


def strip_plot(series: dict[str, list[float]], binary: bool) -> list[str]:
    """Each model's per-seed values as marks on one shared axis (a count where marks coincide)."""
    values = [value for means in series.values() for value in means]
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low < 1e-12:
        low, high = low - 0.5e-3, high + 0.5e-3
    width = max(len(label) for label in series)
    lines = []
    for label, means in series.items():
        cells = [0] * PLOT_WIDTH
        for value in means:
            cells[min(PLOT_WIDTH - 1, int((value - low) / (high - low) * (PLOT_WIDTH - 1) + 0.5))] += 1
        row = "".join(" " if n == 0 else MARK if n == 1 else str(min(n, 9)) for n in cells)
        lines.append(f"{label:<{width}} |{row}|")
    left, right = _value(low, binary), _value(high, binary)
    lines.append(f"{'':<{width}}  {left}{right:>{PLOT_WIDTH - len(left)}}")
    return lines


def evaluation_markdown(block: dict, heading: str = "### Evaluation") -> str:
    """The evaluation section of summary.md, the job summary and the pull-request comment."""
    verdict = block.get("verdict")
    lines = [heading, ""]
    if verdict:
        lines += [f"**{verdict['line']}**", ""]
    elif block.get("no_verdict"):
        lines += [block["no_verdict"], ""]
    seeds, asked = len(block.get("seeds", [])), block.get("asked", 0)
    lines += ["| model | seeds | mean | spread over seeds |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in model_rows(block)]
    series = {"this run": [entry["mean"] for entry in block.get("seeds", [])]}
    if verdict and verdict.get("baseline"):
        series[verdict.get("baseline_ref") or "baseline"] = list(verdict["baseline"].get("seed_means") or [])
    plot = strip_plot(series, _binary(block))
    if plot:
        lines += ["", f"{block.get('metric')} per seed:", "", "```", *plot, "```"]
    if seeds < asked:
        lines += [
            "",
            f"{seeds} of {asked} seeds gave evidence: "
            + "; ".join(_failure(entry) for entry in block.get("failed", [])),
        ]
    if verdict and verdict.get("method"):
        lines += ["", f"<sub>{block.get('examples', verdict.get('examples'))} examples; {verdict['method']}.</sub>"]
    return "\n".join(lines) + "\n"


def _failure(entry: dict) -> str:
    why = entry.get("evidence") or entry.get("status") or "refused"
    return f"seed {entry.get('seed')} ({entry.get('run_id') or 'no run'}): {why}"
