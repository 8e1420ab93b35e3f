"""Presenting a finished run: the metrics table on the console and summary.md."""

from __future__ import annotations

import math

from runner.history.rows import PhaseRow
from runner.history.states import RunStatus
from runner.telemetry.logger import Logger
from runner.telemetry.point import TELEMETRY
from runner.telemetry.summary import sampled
from runner.templates import render

ICONS = {RunStatus.COMPLETED: "✅", RunStatus.FAILED: "❌", RunStatus.CANCELED: "⏹️", RunStatus.TIMED_OUT: "⏱️"}


def metric_rows(summary: dict) -> list[dict]:
    primary = summary.get("primary")
    return [
        {
            "name": name,
            "primary": name == primary,
            "last": _number(values["last"]),
            "best": _number(values["best"]),
            "best_step": "" if values["best_step"] is None else values["best_step"],
            "goal": "" if name.startswith(TELEMETRY) else values["goal"],  # a GPU's memory is no score to win
            "count": values["count"],
        }
        for name, values in summary.get("metrics", {}).items()
    ]


def show_metrics(logger: Logger, summary: dict) -> None:
    rows = metric_rows(summary)
    if not rows:
        logger.info("no metrics were captured")
        return
    table = [
        [r["name"] + (" (primary)" if r["primary"] else ""), r["last"], r["best"], str(r["best_step"]), r["goal"]]
        for r in rows
    ]
    highlight = next((i for i, r in enumerate(rows) if r["primary"]), None)
    logger.table("metrics", ["metric", "last", "best", "step of best", "goal"], table, highlight)


def phase_durations(phases: list[PhaseRow]) -> list[dict]:
    return [
        {"name": p.phase, "duration": f"{(p.ended or p.started) - p.started:.2f}s"}
        for p in phases
        if not RunStatus(p.phase).terminal  # the final status is a mark, not a phase that took time
    ]


CURVE_POINTS = 60
MAX_CURVES = 3


def curves(points, summary: dict) -> list[dict]:
    """Series to draw (the primary metric, then the losses): value per step, at most 60 points.
    `points` may be a whole series (read in one pass) or the recorder's bounded sample."""
    names = [name for name in dict.fromkeys([summary.get("primary"), "accuracy", "loss", "val_loss"]) if name]
    points = sampled(points, names)
    drawn = []
    for name in names:
        by_step = {p.step: p.value for p in points if p.name == name and p.step is not None and math.isfinite(p.value)}
        if len(by_step) < 2:
            continue
        steps = sorted(by_step)
        stride = max(1, math.ceil(len(steps) / CURVE_POINTS))
        steps = steps[::stride]
        drawn.append({"name": name, "steps": steps, "ys": [f"{by_step[s]:.4g}" for s in steps]})
    return drawn[:MAX_CURVES]


def summary_markdown(
    run_id: str, status: RunStatus, message: str | None, phases, summary: dict, model, git: dict, points=(), usage=None
) -> str:
    from runner.telemetry.usage_report import usage_markdown

    return render(
        "run_summary.md.j2",
        curves=curves(points, summary),
        run_id=run_id,
        status=str(status),
        status_icon=ICONS.get(status, ""),
        message=message,
        phases=phase_durations(phases),
        metrics=metric_rows(summary),
        images=summary.get("images", []),
        tags=summary.get("tags", {}),
        model=model,
        commit=git.get("commit"),
        branch=git.get("branch"),
        dirty=git.get("dirty"),
        usage=usage_markdown(usage),
    )


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
