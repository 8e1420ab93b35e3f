"""tftrain runs [show ID]: the run history."""

from __future__ import annotations

import json
import time

from runner.manifest.model import Manifest
from runner.telemetry.point import iter_series
from runner.telemetry.summary import SummaryBuilder
from runner.paths import tftrain_home
from runner.telemetry.report import show_metrics, summary_markdown
from runner.history.rundir import RunPaths
from runner.history.store import Store


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="runs_command")
    parser.add_argument("--limit", type=int, default=30, help="how many runs to list (default 30)")
    show = sub.add_parser("show", help="phases, metrics and files of one run")
    show.add_argument("run", help="run id, run number, or latest")
    show.add_argument("--markdown", action="store_true", help="print the Markdown summary")


def run(args, logger) -> int:
    with Store(tftrain_home(), notify=logger.warning) as store:
        if args.runs_command == "show":
            _show(store, args.run, args.markdown, logger)
        else:
            _list(store, args.limit, logger)
    return 0


def _list(store: Store, limit: int, logger) -> None:
    rows = []
    for run in store.runs(limit):
        duration = f"{(run.ended or time.time()) - run.created:.1f}s"
        rows.append([run.run_id, run.status, _when(run.created), duration, (run.git.get("commit") or "")[:10], run.message or ""])
    if not rows:
        logger.info(f"no runs yet in {store.home}")
        return
    logger.table(f"runs in {store.home}", ["run", "status", "started", "duration", "commit", "message"], rows)


def _show(store: Store, ref: str, markdown: bool, logger) -> None:
    run = store.run(ref)
    manifest, paths = RunPaths.of_run(run)
    record = _record(paths)
    summary = record.get("metrics") or _summary_from_series(paths, manifest)
    phases = store.phases(run.run_id)
    if markdown:
        points = iter_series(paths.metrics)
        logger.text(summary_markdown(run.run_id, run.status, run.message, phases, summary, record.get("model"), record.get("git", {}), points))
        return
    logger.info(f"run {run.run_id}: {run.status}" + (f": {run.message}" if run.message else ""), style="bold")
    logger.info(f"directory: {run.run_dir}")
    git = record.get("git") or {}
    if git.get("commit"):
        logger.info(f"commit: {git['commit']} branch: {git.get('branch')} dirty: {git.get('dirty')}")
    rows = [[p.phase, _when(p.started), f"{(p.ended or time.time()) - p.started:.2f}s"] for p in phases]
    logger.table("phases", ["phase", "started", "duration"], rows)
    show_metrics(logger, summary)
    if record.get("model"):
        logger.info(f"model: {record['model']}")
    files = []
    for root in (paths.outputs, paths.logs):
        files += [[str(p.relative_to(paths.workdir)), str(p.stat().st_size)] for p in sorted(root.rglob("*")) if p.is_file()]
    logger.table("files", ["file", "bytes"], files)


def _record(paths: RunPaths) -> dict:
    try:
        return json.loads(paths.record.read_text())
    except (OSError, ValueError):
        return {}


def _summary_from_series(paths: RunPaths, manifest: Manifest) -> dict:
    builder = SummaryBuilder(manifest.metrics)
    builder.add(iter_series(paths.metrics))
    return builder.as_dict()


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
