"""tftrain logs ID [--rank N] [--follow]: a run's log, as written by the training process."""

from __future__ import annotations

import sys
import time

from runner.errors import NotFoundError
from runner.history.regular import open_regular
from runner.history.rundir import RunPaths
from runner.paths import tftrain_home
from runner.targets.leftovers import open_history, reconcile

FOLLOW_POLL = 0.2
LOST_CHECK_POLLS = 10


def add_arguments(parser) -> None:
    parser.add_argument("run", help="run id, run number, or latest")
    parser.add_argument("--rank", type=int, default=0, help="which process (default 0)")
    parser.add_argument("--follow", action="store_true", help="keep printing until the run ends")


def run(args, logger) -> int:
    with open_history(tftrain_home(), logger.warning, reading=True) as store:
        record = store.run(args.run)
        path = RunPaths.of_run(record)[1].rank_log(args.rank)
        logger.flush()
        offset = _copy_from(path, 0, args.follow and not record.finished)
        polls = 0
        while args.follow and not store.run(record.run_id).finished:
            time.sleep(FOLLOW_POLL)
            offset = _copy_from(path, offset, True)
            polls += 1
            if polls % LOST_CHECK_POLLS == 0:
                reconcile(store)  # a run whose tftrain died never finishes by itself
        _copy_from(path, offset, args.follow)
    return 0


def _copy_from(path, offset: int, may_be_missing: bool) -> int:
    """Print the log from `offset` on; only a regular file is read (a FIFO put in its place by the
    training would block `tftrain logs` forever)."""
    try:
        with open_regular(path) as handle:
            handle.seek(offset)
            while chunk := handle.read(1 << 16):
                sys.stdout.buffer.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        if not may_be_missing:
            ranks = sorted(p.stem for p in path.parent.glob("*.log")) if path.parent.exists() else []
            raise NotFoundError(f"{path} does not exist (ranks with logs: {', '.join(ranks) or 'none'})") from None
    except OSError as exc:
        raise NotFoundError(f"{path} is no log tftrain wrote ({exc.strerror})") from None
    sys.stdout.buffer.flush()
    return offset
