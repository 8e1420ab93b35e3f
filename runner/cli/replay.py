"""tftrain replay REQUESTS --candidate REF [--baseline REF] [--concurrency N] [--tolerance X] [--timeout S]
[--min-agreement A] [--max-latency-ratio R] [--json] [-o replay.json]: the same requests sent to two
versions (runner.replay.engine), their answers and latencies compared.

    tftrain replay export DIR --warmup FILE --model REF

writes the requests recorded in DIR (or a request file) as TensorFlow Serving's warmup file for REF's
signature (runner.cli.replay_export, runner.replay.warmup). A request file literally named `export` is given as
./export.

REQUESTS is a JSON Lines request file, a `tftrain serve --record` directory or a TF Serving warmup
file; REF is what `tftrain serve` takes (NAME@vN, NAME@latest, a run id, release:NAME@vN). Without
--baseline the candidate is replayed alone. With --min-agreement or --max-latency-ratio, a candidate
that fails them ends with exit 33 (the report is printed first).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from pathlib import Path

from runner.cli.releases import github_repo, release_errors
from runner.errors import ReplayError, UsageError
from runner.paths import tftrain_home

EXPORT = "export"


def add_arguments(parser) -> None:
    refs = "NAME@vN, NAME@latest, a run id, or release:NAME@vN|@latest"
    parser.add_argument(
        "requests",
        metavar="REQUESTS",
        help="a request file (JSON Lines), a recording directory or a warmup file; or `export`: see below",
    )
    parser.add_argument(
        "directory", nargs="?", metavar="DIR", help="replay export: the recording directory or request file"
    )
    parser.add_argument("--candidate", metavar="REF", help=refs)
    parser.add_argument("--baseline", metavar="REF", help=f"{refs} (default: none, the candidate alone)")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="requests in flight to each version at once (default 4)"
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=1e-3,
        help="largest |Δ| of one value counted as the same answer (default 0.001)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="one request's limit in seconds (default 30)")
    parser.add_argument("--max-requests", type=int, help="replay only the first N")
    parser.add_argument(
        "--min-agreement", type=float, help=f"exit {ReplayError.exit_code} below this share of requests answered alike"
    )
    parser.add_argument(
        "--max-latency-ratio",
        type=float,
        help=f"exit {ReplayError.exit_code} when the candidate's p99 passes this × the baseline's",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-o", "--output", type=Path, help="also write the report (replay.json) there")
    parser.add_argument(
        "--warmup",
        type=Path,
        metavar="FILE",
        help="replay export: the warmup file to write (tf_serving_warmup_requests)",
    )
    parser.add_argument(
        "--model", metavar="REF", help="replay export: the version whose signature the warmup requests follow"
    )


def run(args, logger) -> int:
    if args.requests == EXPORT:
        from runner.cli import replay_export

        if args.directory is None or args.warmup is None or args.model is None:
            raise UsageError(
                "tftrain replay export DIR --warmup FILE --model REF: DIR, --warmup and --model are all needed"
            )
        return replay_export.run(Path(args.directory), args.warmup, args.model, logger)
    check_options(args)
    from runner.replay.engine import ReplayOptions, replay
    from runner.replay.sources import load_requests
    from runner.serving.records import RequestsError
    from runner.serving.refs import checked_out

    try:
        requests = load_requests(Path(args.requests))
    except RequestsError as exc:
        raise ReplayError(str(exc)) from None
    if args.max_requests is not None:
        requests = requests[: args.max_requests]
    options = ReplayOptions(args.concurrency, args.tolerance, args.timeout, origin=str(args.requests))
    home = tftrain_home()
    progress = logger.on_stderr() if args.json else logger  # with --json, stdout holds the report alone
    with tempfile.TemporaryDirectory(prefix="tftrain-replay-") as scratch, contextlib.ExitStack() as stack:
        root = Path(scratch)
        sides = []
        for role, ref in (("candidate", args.candidate), ("baseline", args.baseline)):
            if ref is None:
                continue
            (root / role).mkdir()
            stack.enter_context(release_errors(ref))
            sides.append(stack.enter_context(checked_out(ref, progress, lambda: github_repo(args), root / role, home)))
        with servers_logs() as logs:
            report = replay(requests, sides[0], sides[1] if len(sides) > 1 else None, options, progress, logs)
    progress.flush()
    if args.json:
        logger.text(report.to_text().rstrip("\n"))
    else:
        logger.text(report.line())
        logger.text(report.markdown())
    if args.output is not None:  # after the report is printed: a file that cannot be written loses nothing
        write_report(args.output, report.to_text())
    problems = report.problems(args.min_agreement, args.max_latency_ratio)
    if problems and (args.min_agreement is not None or args.max_latency_ratio is not None or args.baseline is None):
        raise ReplayError("; ".join(problems))
    return 0


def check_options(args) -> None:
    """UsageError (one line, exit 2) for what cannot be replayed as asked."""
    if args.directory is not None or args.warmup is not None or args.model is not None:
        raise UsageError(
            "DIR, --warmup and --model are replay export's: tftrain replay export DIR --warmup FILE --model REF"
        )
    if args.candidate is None:
        raise UsageError("give the version to replay with --candidate REF (and --baseline REF to compare with)")
    if not 1 <= args.concurrency <= 64:
        raise UsageError(f"--concurrency {args.concurrency}: 1 to 64")
    for flag, value, low, high in (
        ("--tolerance", args.tolerance, 0, 1e6),
        ("--timeout", args.timeout, 1e-3, 3600),
        ("--min-agreement", args.min_agreement, 0, 1),
        ("--max-latency-ratio", args.max_latency_ratio, 1e-3, 1000),
    ):
        if value is not None and (not math.isfinite(value) or not low <= value <= high):
            raise UsageError(f"{flag} {value:g}: a number from {low:g} to {high:g}")
    if args.max_requests is not None and args.max_requests < 1:
        raise UsageError(f"--max-requests {args.max_requests}: at least 1")
    if args.output is not None and (args.output.is_dir() or not args.output.parent.is_dir()):
        where = "a directory" if args.output.is_dir() else f"{args.output.parent} is not a directory"
        raise UsageError(f"-o {args.output}: {where}: give the report file's name")


@contextlib.contextmanager
def servers_logs():
    """A directory for the servers' logs, removed after the replay unless its error names a log in it
    (a server that did not start, or ended on the way): that one is kept for the user to read."""
    import shutil

    logs = Path(tempfile.mkdtemp(prefix="tftrain-replay-logs-"))
    try:
        yield logs
    except BaseException as exc:
        if str(logs) not in str(exc):
            shutil.rmtree(logs, ignore_errors=True)
        raise
    shutil.rmtree(logs, ignore_errors=True)


def write_report(path: Path, text: str) -> None:
    """The report at `path`; one line when it cannot be written (a full disk: exit 22)."""
    from runner.history.rundir import space_error

    try:
        path.write_text(text)
    except OSError as exc:
        raise space_error(exc, path) or UsageError(f"-o {path}: cannot be written ({exc.strerror or exc})") from None
