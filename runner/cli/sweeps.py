"""tftrain sweeps [show SWEEP_ID|latest [--json]]: the sweeps of this TFTRAIN_HOME."""

from __future__ import annotations

import json
import time

from runner.errors import NotFoundError, UsageError
from runner.paths import tftrain_home
from runner.sweep.book import read_sweep, sweeps_root
from runner.sweep.pareto import best_words, objective_metrics
from runner.sweep.summary import SHOWN_KEYS, trial_row


def add_arguments(parser) -> None:
    parser.add_argument("action", nargs="?", choices=("list", "show"), default="list")
    parser.add_argument("sweep_id", nargs="?", metavar="SWEEP_ID", help="a sweep id, or latest")
    parser.add_argument("--json", action="store_true", help="show: the sweep as JSON")


def run(args, logger) -> int:
    home = tftrain_home()
    documents = _all(home)
    if args.action == "list":
        if args.sweep_id:
            raise UsageError("tftrain sweeps takes no SWEEP_ID; did you mean `tftrain sweeps show SWEEP_ID`?")
        rows = [_list_row(doc) for doc in documents]
        logger.table(f"sweeps in {home}", ["sweep", "status", "trials", "best", "created"], rows)
        return 0
    if not args.sweep_id:
        raise UsageError("tftrain sweeps show needs a SWEEP_ID (or latest)")
    document = _find(documents, args.sweep_id, home)
    if args.json:
        logger.text(json.dumps({key: document[key] for key in SHOWN_KEYS if key in document}, indent=2))
        return 0

    metrics = objective_metrics(document)
    front = document.get("pareto") if isinstance(document.get("pareto"), list) else ()
    rows = [trial_row(t, metrics=metrics, front=front) for t in document["trials"]]
    logger.table(f"sweep {document['id']}: {document['status']}", ["trial", "run", "status", *metrics, "params"], rows)
    best = document["best"]
    if best:
        logger.info(
            f"best: trial {best['number']} (run {best['run_id']}) {best_words(best, metrics)}"
            + (f", model {best['model_version']}" if best["model_version"] else "")
        )
    if len(metrics) > 1:
        logger.info(
            f"Pareto front: trials {', '.join(map(str, front)) or 'none'} (none beaten on every objective by another)"
        )
    return 0


def _all(home) -> list[dict]:
    root = sweeps_root(home)
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        try:
            found.append(read_sweep(home, folder.name))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda doc: doc.get("created", 0))


def _find(documents: list[dict], ref: str, home) -> dict:
    if ref == "latest" and documents:
        return documents[-1]
    for document in documents:
        if document["id"] == ref:
            return document
    raise NotFoundError(f"sweep {ref!r} not found in {home} (see `tftrain sweeps`)")


def _list_row(document: dict) -> list[str]:
    best = document.get("best")
    value = "" if not best else f"{objective_metrics(document)[0]}={best['value']:.6g} (trial {best['number']})"
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(document.get("created", 0)))
    return [document["id"], document["status"], str(len(document["trials"])), value, created]
