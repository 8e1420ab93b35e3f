"""Presenting a finished run: the metrics table on the console and summary.md."""

from __future__ import annotations

from runner.logger import Logger
from runner.store import PhaseRow
from runner.templates import render

ICONS = {"Completed": "✅", "Failed": "❌", "Canceled": "⏹️", "TimedOut": "⏱️"}


def metric_rows(summary: dict) -> list[dict]:
    primary = summary.get("primary")
    return [
        {
            "name": name,
            "primary": name == primary,
            "last": _number(values["last"]),
            "best": _number(values["best"]),
            "best_step": "" if values["best_step"] is None else values["best_step"],
            "goal": values["goal"],
            "count": values["count"],
        }
        for name, values in summary.get("metrics", {}).items()
    ]


def show_metrics(logger: Logger, summary: dict) -> None:
    rows = metric_rows(summary)
    if not rows:
        logger.info("no metrics were captured")
        return
    table = [[r["name"] + (" (primary)" if r["primary"] else ""), r["last"], r["best"], str(r["best_step"]), r["goal"]] for r in rows]
    highlight = next((i for i, r in enumerate(rows) if r["primary"]), None)
    logger.table("metrics", ["metric", "last", "best", "step of best", "goal"], table, highlight)


def phase_durations(phases: list[PhaseRow]) -> list[dict]:
    return [
        {"name": p.phase, "duration": f"{(p.ended or p.started) - p.started:.2f}s"}
        for p in phases
        if p.ended is not None and p.ended != p.started or p.phase in ("Preparing", "Running", "PostProcessing")
    ]


def summary_markdown(run_id: str, status: str, message: str | None, phases, summary: dict, model, git: dict) -> str:
    return render(
        "run_summary.md.j2",
        run_id=run_id,
        status=status,
        status_icon=ICONS.get(status, ""),
        message=message,
        phases=phase_durations(phases),
        metrics=metric_rows(summary),
        model=model,
        commit=git.get("commit"),
        branch=git.get("branch"),
        dirty=git.get("dirty"),
    )


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
