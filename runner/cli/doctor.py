"""tftrain doctor [--rebuild]: check the run history's index (tftrain.db) and rebuild it from the
run and model directories when it is damaged. The damaged file is kept aside, never deleted: so is
a FIFO, a device, a directory or a link to one of those in its place (or in its -wal, -shm or
history.lock's), renamed without being opened."""

from __future__ import annotations

from runner.history.index import plural
from runner.history.indexfile import inspect
from runner.history.store import DB_NAME, Store
from runner.paths import tftrain_home
from runner.shared.refs import run_number
from runner.targets.leftovers import open_history


def add_arguments(parser) -> None:
    parser.add_argument(
        "--rebuild", action="store_true", help="rebuild it even when it looks healthy (the old one is kept)"
    )


def run(args, logger) -> int:
    home = tftrain_home()
    path = home / DB_NAME
    problems = inspect(path)
    for problem in problems:
        logger.warning(f"{path}: {problem}")
    label = "damaged" if problems else "old" if args.rebuild else None
    with open_history(home, logger.warning, set_aside=label) as store:
        if store.set_aside_as:  # the index first, then its -wal, -shm and an odd history.lock
            more = [moved.name for moved in store.set_aside_as[1:]]
            logger.info(
                f"kept the old index as {store.set_aside_as[0]}" + (f" (and {', '.join(more)})" if more else "")
            )
        if store.rebuilt:
            if label:  # a missing index: opening it said so already
                logger.info(f"rebuilt {path} from {store.rebuilt.summary()} in {home}", style="bold green")
            for problem in store.rebuilt.problems:
                logger.warning(f"could not rebuild: {problem}")
        else:
            _check_coverage(store, logger)
    return 0


def _check_coverage(store: Store, logger) -> None:
    """A healthy index: say what it holds, and which directories it does not know."""
    indexed = {run_id for (run_id,) in store.db.execute("SELECT run_id FROM runs")}
    (models,) = store.db.execute("SELECT COUNT(*) FROM models WHERE state = 'ready'").fetchone()
    runs_dir = store.home / "runs"
    on_disk = [path.name for path in runs_dir.iterdir() if path.is_dir()] if runs_dir.is_dir() else []
    missing = sorted((name for name in on_disk if run_number(name) and name not in indexed), key=run_number)
    counts = f"{plural(len(indexed), 'run')}, {plural(models, 'model version')}"
    logger.info(f"{store.path}: ok ({counts})", style="bold green")
    if missing:
        logger.warning(
            f"{len(missing)} run directories are not in the index ({', '.join(missing[:5])}"
            f"{', …' if len(missing) > 5 else ''}): `tftrain doctor --rebuild` adds them"
        )
