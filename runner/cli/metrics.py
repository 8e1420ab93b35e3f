"""tftrain metrics ID [--json]: a run's metrics series."""

from __future__ import annotations

from pathlib import Path

from runner.errors import NotFoundError
from runner.history.regular import open_regular
from runner.history.rundir import RunPaths
from runner.paths import tftrain_home
from runner.targets.leftovers import open_history
from runner.telemetry.point import read_series


def add_arguments(parser) -> None:
    parser.add_argument("run", help="run id, run number, or latest")
    parser.add_argument("--json", action="store_true", help="print JSON lines (name, value, step, time, source)")


def run(args, logger) -> int:
    with open_history(tftrain_home(), logger.warning, reading=True) as store:
        record = store.run(args.run)
    points = read_series(_regular_or_none(RunPaths.of_run(record)[1].metrics))
    if args.json:
        if points:
            logger.text("".join(point.to_json() + "\n" for point in points))
        return 0
    rows = [[p.name, f"{p.value:.6g}", "" if p.step is None else str(p.step), p.source, str(p.rank)] for p in points]
    if rows:
        logger.table(f"metrics of {record.run_id}", ["metric", "value", "step", "source", "rank"], rows)
    else:
        logger.info(f"run {record.run_id} has no metrics")
    return 0


def _regular_or_none(path: Path) -> Path:
    """`path` when it holds metrics to read or nothing: a FIFO or device in its place would block
    or never end the read, so it is one line instead."""
    try:
        open_regular(path).close()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise NotFoundError(f"{path} holds no metrics tftrain wrote ({exc.strerror})") from None
    return path
