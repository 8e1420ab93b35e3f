"""tftrain runs [show ID]: the run history."""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING

from runner.errors import HistoryError
from runner.history.rundir import RunPaths
from runner.history.store import Store
from runner.history.untrusted import read_json
from runner.paths import tftrain_home
from runner.targets.leftovers import open_history
from runner.telemetry.point import iter_series

if TYPE_CHECKING:  # pydantic's models (the manifest's, the run record's): what listing runs does without
    from runner.history.record import MetricsSummary, RunRecord
    from runner.manifest.model import Manifest


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="runs_command")
    parser.add_argument("--limit", type=int, default=30, help="how many runs to list (default 30)")
    show = sub.add_parser("show", help="phases, metrics and files of one run")
    show.add_argument("run", help="run id, run number, or latest")
    show.add_argument("--markdown", action="store_true", help="print the Markdown summary")
    show.add_argument("--json", action="store_true", help="print the run record (run.json: usage and cost included)")


def run(args, logger) -> int:
    # a run whose tftrain is gone is listed Failed, not Running forever; a home with no history yet is
    # listed empty, nothing made
    with open_history(tftrain_home(), logger.warning, reading=True) as store:
        if args.runs_command == "show":
            _show(store, args.run, args.markdown, logger, as_json=args.json)
        else:
            _list(store, args.limit, logger)
    return 0


def _list(store: Store, limit: int, logger) -> None:
    rows = []
    for run in store.runs(limit):
        duration = f"{(run.ended or time.time()) - run.created:.1f}s"
        hours = _gpu_hours(RunPaths(run.run_dir))  # run.json's usage, read as it is (a damaged one lists without)
        used = f"{hours:.4g}" if hours is not None else ""
        rows.append(
            [
                run.run_id,
                run.status,
                _when(run.created),
                duration,
                used,
                (run.git.get("commit") or "")[:10],
                run.message or "",
            ]
        )
    if not rows:
        logger.info(f"no runs yet in {store.home}")
        return
    logger.table(
        f"runs in {store.home}", ["run", "status", "started", "duration", "GPU-hours", "commit", "message"], rows
    )


def _show(store: Store, ref: str, markdown: bool, logger, as_json: bool = False) -> None:
    run = store.run(ref)
    manifest, paths = RunPaths.of_run(run)
    # the run's secrets are hidden here as they were while it ran: what the run left behind (a file
    # under outputs named after a secret's value, say) is shown through the same masking
    logger.mask_secrets(manifest.secrets, os.environ)
    record = _record(paths)
    if as_json:
        if record is None:
            raise HistoryError(f"run {run.run_id}: {paths.record} cannot be read")
        logger.text(json.dumps(record.as_dict(), indent=2))
        return
    kept = record.metrics if record else None
    summary = (kept if kept and kept.metrics else _summary_from_series(paths, manifest)).as_dict()
    model, git = (record.model, record.git) if record else (None, {})
    phases = store.phases(run.run_id)
    from runner.telemetry.report import show_metrics, summary_markdown
    from runner.telemetry.usage_report import usage_rows

    if markdown:
        points = iter_series(paths.metrics)
        logger.text(
            summary_markdown(
                run.run_id,
                run.status,
                run.message,
                phases,
                summary,
                model,
                git,
                points,
                record.usage if record else None,
            )
        )
        return
    logger.info(f"run {run.run_id}: {run.status}" + (f": {run.message}" if run.message else ""), style="bold")
    logger.info(f"directory: {run.run_dir}")
    if record is not None and record.attempt is not None:
        logger.info(record.attempt.described())
    if git.get("commit"):
        logger.info(f"commit: {git['commit']} branch: {git.get('branch')} dirty: {git.get('dirty')}")
    rows = [[p.phase, _when(p.started), f"{(p.ended or time.time()) - p.started:.2f}s"] for p in phases]
    logger.table("phases", ["phase", "started", "duration"], rows)
    show_metrics(logger, summary)
    if record is not None and record.usage is not None:
        logger.table("usage", ["", ""], usage_rows(record.usage))
    if model:
        logger.info(f"model: {model}")
    files = []
    for root in (paths.outputs, paths.logs):
        files += [
            [str(p.relative_to(paths.workdir)), str(p.stat().st_size)] for p in sorted(root.rglob("*")) if p.is_file()
        ]
    logger.table("files", ["file", "bytes"], files)


def _record(paths: RunPaths) -> RunRecord | None:
    """run.json, or None when it cannot be read (the index still lists the run)."""
    from runner.history.record import RunRecord

    try:
        return RunRecord.read(paths.record)
    except (OSError, ValueError):
        return None


def _gpu_hours(paths: RunPaths) -> float | None:
    """run.json's usage.gpu_seconds in hours, without building the run record (a listing of many
    runs reads only this); None when there is none or it is not a finite number ≥ 0."""
    try:
        record = read_json(paths.record)
    except (OSError, ValueError):
        return None
    usage = record.get("usage") if isinstance(record, dict) else None
    seconds = usage.get("gpu_seconds", 0.0) if isinstance(usage, dict) else None
    ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds) and seconds >= 0
    return seconds / 3600 if ok else None


def _summary_from_series(paths: RunPaths, manifest: Manifest) -> MetricsSummary:
    """A run without a summary (it ended before writing one): from metrics.jsonl, the same way."""
    from runner.telemetry.summary import SummaryBuilder

    builder = SummaryBuilder(manifest.metrics)
    builder.add(iter_series(paths.metrics))
    return builder.summary()


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
