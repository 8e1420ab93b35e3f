"""A sweep as people read it: one row per trial (`tftrain sweeps`), and the Markdown summary (the job
summary and the sweep's report): its trials ranked, the Pareto front, a chart of the objective."""

from __future__ import annotations

import math

from runner.sweep.pareto import best_words, front_markdown, objective_metrics, value_cells

SHOWN_KEYS = (
    "id",
    "status",
    "objective",
    "trials",
    "best",
    "pareto",
    "budget",
)  # pareto: a multi-objective sweep's only; budget: a sweep its budget stopped


def trial_row(trial: dict, step: bool = False, metrics: list[str] | None = None, front=()) -> list[str]:
    """trial, run, status, [step,] value (one per objective of a multi-objective sweep), params:
    the trials table's cells; a trial on the Pareto front (`front`) says so."""
    status = trial["status"] + (" (early termination)" if trial["early_terminated"] else "")
    status += " (Pareto front)" if trial["number"] in front else ""
    values = value_cells(trial, metrics or ["value"])
    params = "  ".join(f"{key}={given}" for key, given in trial["params"].items())
    at = ["" if trial.get("step") is None else str(trial["step"])] if step else []
    return [str(trial["number"]), trial["run_id"] or "", status, *at, *values, params]


def summary_markdown(document: dict, metric: str) -> str:
    """The job summary (and the PR comment): the trials table, the best trial, a multi-objective
    sweep's Pareto front, the primary metric's curves."""
    metrics = objective_metrics(document)
    front = document.get("pareto") if isinstance(document.get("pareto"), list) else ()
    header = "| trial | run | status | " + " | ".join(metrics) + " | params |"
    budget = [f"**Budget:** {document['budget']}", ""] if isinstance(document.get("budget"), str) else []
    lines = [
        f"## Sweep {document['id']}: {document['status']}",
        "",
        *budget,
        header,
        "|---|---|---|" + "---|" * len(metrics) + "---|",
    ]
    for trial in document["trials"]:
        cells = [cell.replace("|", "\\|").replace("\n", " ") for cell in trial_row(trial, metrics=metrics, front=front)]
        lines.append("| " + " | ".join(cells) + " |")
    best = document["best"]
    if best:
        model = f" → model `{best['model_version']}`" if best["model_version"] else ""
        words = best_words(best, metrics).replace("=", " = ", 1) if len(metrics) == 1 else best_words(best, metrics)
        lines += ["", f"Best: trial {best['number']} (run `{best['run_id']}`), {words}{model}"]
    lines += front_markdown(document, metrics)
    chart = _chart(document["curves"], metric)
    return "\n".join(lines + ([""] + chart if chart else [])) + "\n"


def _chart(curves: dict[str, list[float]], metric: str) -> list[str]:
    """The primary metric of each trial at each report (mermaid xychart); a trial that reported a
    value that is no number (nan, inf) is left out: mermaid cannot draw it."""
    series = [values for values in curves.values() if values and all(finite(v) for v in values)]
    if not series:
        return []
    steps = max(len(values) for values in series)
    return (
        [
            "```mermaid",
            "xychart-beta",
            f'  title "{metric} per trial"',
            f"  x-axis [{', '.join(str(n) for n in range(1, steps + 1))}]",
        ]
        + ["  line [" + ", ".join(f"{v:.6g}" for v in values) + "]" for values in series]
        + ["```"]
    )


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
