"""`retry:`: a run that ends for a cause the manifest names starts again as a new run, the next
attempt, linked to the previous one and resuming from its latest checkpoint.

How an attempt ended:
- preempted: its machine, container or training was taken away. tftrain got SIGTERM or SIGHUP
  (a runner shutting down, `docker stop`, a node drained: SIGINT is a user's Ctrl-C or GitHub's
  cancel, and stays a cancel); a pool host or container was lost (Vanished, HostError); or the
  training was killed by SIGKILL or SIGTERM that tftrain did not send (its own cancel and time
  limit end the run Canceled or TimedOut, never Failed).
- lost: tftrain itself was killed; a later command that reconciles the history marks the run
  Failed with the cause lost (runner.targets.leftovers.reconcile; the next `tftrain run` does).
- exit code N: the script exited with one of `retry.exit_codes`.

A preempted attempt whose tftrain was signalled, and a lost one, cannot be followed in the same
process (it is going away): the next `tftrain run` of the same manifest continues the chain. The
others are followed at once, here. Two `tftrain run`s started together continue a lost run once:
each takes the previous run's claim (a lock in its directory) before it looks whether the run was
continued, and holds it until its own attempt is recorded as the run's `next`; the other then
finds it continued and starts afresh.
"""

from __future__ import annotations

import fcntl
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

from runner.errors import FatalError, HostError
from runner.history.record import Attempt, Cause, RunRecord, RunStatus
from runner.history.rows import RunRow
from runner.history.rundir import RunPaths
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.manifest.retry import RetrySpec
from runner.settings import Settings
from runner.targets.base import RunControl
from runner.targets.leftovers import open_history
from runner.telemetry.logger import Logger
from runner.telemetry.point import MetricPoint
from runner.training.context import RunWatch
from runner.training.pipeline import RunResult, run_manifest

# exit statuses of a training killed by these signals: -N from Python, 128 + N from a shell or a container
KILLED = {code for sig in (signal.SIGKILL, signal.SIGTERM) for code in (-sig, 128 + sig)}
TAKEN_AWAY = (signal.SIGTERM, signal.SIGHUP)
CHAIN_LOOKBACK = 20  # how many of the newest runs are searched for this manifest's last attempt
CLAIM_NAME = ".continue.lock"  # in a run's directory: held by the tftrain that is continuing it


class Ending(NamedTuple):
    """Why an attempt ended, when that is a cause to retry: the cause, and the script's exit code
    when it is one `retry.exit_codes` names. Written as people read it: "exit code 75"."""

    cause: Cause
    exit_code: int | None = None

    def __str__(self) -> str:
        return f"{self.cause} {self.exit_code}" if self.cause == Cause.EXIT_CODE else str(self.cause)


def run_with_retry(
    loaded: LoadedManifest, logger: Logger, settings: Settings, home: Path, watch: RunWatch | None = None
) -> RunResult:
    """run_manifest, attempt after attempt while each ends for a cause `retry:` names; `watch`
    (an evaluation's seed) follows every attempt."""
    spec = loaded.manifest.retry
    if spec is None:
        return run_manifest(loaded, logger, settings, home, watch=watch)
    with ExitStack() as claim:  # a lost run's claim, until this attempt is linked to it
        attempt = _continued(loaded, spec, home, logger, claim)
        if attempt is None:
            claim.close()
            attempt = Attempt(number=1, max_attempts=spec.max_attempts)
        return _attempts(loaded, spec, attempt, logger, settings, home, claim.close, watch)


def _attempts(
    loaded: LoadedManifest,
    spec: RetrySpec,
    attempt: Attempt,
    logger: Logger,
    settings: Settings,
    home: Path,
    linked: Callable[[], None],
    watch: RunWatch | None = None,
) -> RunResult:
    results = []
    while True:
        result = run_manifest(
            _resuming(loaded, attempt), logger, settings, home, watch=_AttemptWatch(attempt, linked, watch)
        )
        results.append(result)
        cause = ending_cause(result, spec)
        if cause is not None:
            _update(home, result.run_id, spec, ended=cause.cause, exit_code=cause.exit_code)
        if cause is None or not _follows_here(result):
            break
        if attempt.number >= spec.max_attempts:
            logger.warning(f"run {result.run_id} {cause}: no attempt left (retry.max_attempts: {spec.max_attempts})")
            break
        attempt = _next_attempt(home, result.run_id, attempt.number + 1, spec, logger)
        logger.warning(
            f"run {result.run_id} {cause}: attempt {attempt.number} of {spec.max_attempts}"
            + (f" resumes from {attempt.resumed_from}" if attempt.resumed_from else " starts over (no checkpoint yet)")
        )
    if len(results) > 1:
        logger.step_summary(attempts_markdown(home, [result.run_id for result in results]))
    return result


def ending_cause(result: RunResult, spec: RetrySpec) -> Ending | None:
    """Why the attempt ended, when that is a cause `spec` retries; None otherwise."""
    ended = result.ended
    cause = None
    if result.status == RunStatus.CANCELED and result.stop_signal in TAKEN_AWAY:
        cause = Cause.PREEMPTED
    elif result.status == RunStatus.FAILED:
        if result.exit_code == HostError.exit_code or (ended is not None and ended.taken):
            cause = Cause.PREEMPTED
        elif ended is not None and ended.exit_code in KILLED:
            cause = Cause.PREEMPTED
        elif ended is not None and ended.exit_code in spec.exit_codes:
            return Ending(Cause.EXIT_CODE, ended.exit_code)
    return Ending(cause) if cause is not None and spec.retries(cause) else None


def _follows_here(result: RunResult) -> bool:
    """tftrain told to stop by its machine goes away with it: the next `tftrain run` follows."""
    return result.stop_signal not in TAKEN_AWAY


def _continued(loaded: LoadedManifest, spec: RetrySpec, home: Path, logger: Logger, claim: ExitStack) -> Attempt | None:
    """The next attempt of this manifest's last run, when that one was lost, or preempted while
    its tftrain was stopped, and not followed yet; its claim is entered on `claim`."""
    with open_history(
        home, logger.warning
    ) as store:  # the last run, if its tftrain is gone, is marked lost (and what it left, removed)
        last = next((run for run in store.runs(CHAIN_LOOKBACK) if run.name == loaded.manifest.name), None)
    if last is None or not last.finished:
        return None
    try:
        claim.enter_context(_claimed(Path(last.run_dir)))  # waits while another tftrain continues it
    except OSError:  # its directory removed (tftrain runs rm): nothing to continue
        return None
    record = _record(last)  # read under the claim: a continuation recorded meanwhile shows
    attempt = record.attempt if record else None
    if attempt is not None and attempt.next:
        return None
    if record is not None and record.lost:
        cause = Cause.LOST
    elif attempt is not None and attempt.ended == Cause.PREEMPTED and last.status == RunStatus.CANCELED:
        cause = Cause.PREEMPTED
    else:
        return None
    if not spec.retries(cause):
        return None
    number = (attempt.number if attempt else 1) + 1
    _update(home, last.run_id, spec, ended=cause, exit_code=None)
    if number > spec.max_attempts:
        logger.warning(
            f"run {last.run_id} was {cause}; no attempt left (retry.max_attempts: {spec.max_attempts}): starting afresh"
        )
        return None
    following = _next_attempt(home, last.run_id, number, spec, logger)
    logger.warning(
        f"run {last.run_id} was {cause}: this is attempt {number} of {spec.max_attempts}"
        + (f", resuming from {following.resumed_from}" if following.resumed_from else " (no checkpoint to resume from)")
    )
    return following


@contextmanager
def _claimed(run_dir: Path) -> Iterator[None]:
    """The right to continue the run: one tftrain at a time (released by the kernel if it dies)."""
    with open(run_dir / CLAIM_NAME, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _next_attempt(home: Path, previous: str, number: int, spec: RetrySpec, logger: Logger) -> Attempt:
    resumed_from = _checkpoint_of(home, previous, number, logger.warning)
    return Attempt(number=number, max_attempts=spec.max_attempts, previous=previous, resumed_from=resumed_from)


def _checkpoint_of(home: Path, run_id: str, number: int, warn: Callable[[str], None]) -> str | None:
    """What the next attempt resumes from: the checkpoint the previous one synced (its `checkpoints:`),
    else its own checkpoint directory (`checkpoints.dir`, or outputs/checkpoints) when it wrote one;
    None: the manifest's own resume_from."""
    with Store(home) as store:
        manifest, paths = RunPaths.of_run(store.run(run_id))
        synced = manifest.checkpoints is not None and _synced_any(run_id, store)
    if synced:
        return f"checkpoint:{run_id}"
    directory = (
        paths.outputs / "checkpoints" if manifest.checkpoints is None else paths.workdir / manifest.checkpoints.dir
    )
    found = directory.is_dir() and any(directory.iterdir())
    if manifest.checkpoints is not None:
        fallback = (
            f"resumes from its local checkpoint directory {directory}"
            if found
            else "starts from scratch (no local checkpoint either)"
        )
        warn(
            f"run {run_id} synced no complete checkpoint to {manifest.checkpoints.sync_to}: attempt {number} {fallback}"
        )
    return str(directory) if found else None


def _synced_any(run_id: str, store: Store) -> bool:
    """Whether the run synced a complete checkpoint; a store that does not answer counts as yes:
    the next attempt's Preparing then says what is wrong with it, in one line."""
    from runner.training.checkpoints import synced_checkpoints  # boto3, only with `checkpoints:`

    try:
        return bool(synced_checkpoints(run_id, store))
    except FatalError:
        return True


def _resuming(loaded: LoadedManifest, attempt: Attempt) -> LoadedManifest:
    if attempt.resumed_from is None:
        return loaded
    return loaded._replace(manifest=loaded.manifest.model_copy(update={"resume_from": attempt.resumed_from}))


class _AttemptWatch:
    """Writes the attempt into the run's record as soon as the run exists, and links the previous one to it."""

    def __init__(self, attempt: Attempt, linked: Callable[[], None], outer: RunWatch | None = None) -> None:
        self.attempt, self.linked, self.outer = attempt, linked, outer

    def started(self, run_id: str, control: RunControl, store: Store) -> None:
        if self.outer is not None:
            self.outer.started(run_id, control, store)
        store.update_run(run_id, attempt=self.attempt)
        if self.attempt.previous is not None:
            previous = _record(store.run(self.attempt.previous))
            if previous is not None and previous.attempt is not None:
                store.update_run(self.attempt.previous, attempt=previous.attempt.model_copy(update={"next": run_id}))
            else:  # a run from before `retry:` was set, or whose record is damaged
                store.update_run(
                    self.attempt.previous,
                    attempt=Attempt(number=1, max_attempts=self.attempt.max_attempts, next=run_id),
                )
        self.linked()  # the previous run's claim: another tftrain now finds it continued

    def points(self, points: list[MetricPoint]) -> None:
        if self.outer is not None:
            self.outer.points(points)


def _update(home: Path, run_id: str, spec: RetrySpec, **changes) -> None:
    """Change the run's attempt; a run recorded before it had one (its tftrain killed at once) was a first."""
    with Store(home) as store:
        record = _record(store.run(run_id))
        attempt = record.attempt if record is not None else None
        attempt = attempt or Attempt(number=1, max_attempts=spec.max_attempts)
        store.update_run(run_id, attempt=attempt.model_copy(update=changes))


def _record(run: RunRow) -> RunRecord | None:
    try:
        return RunRecord.read(Path(run.run_dir) / "run.json")
    except (OSError, ValueError):
        return None


def attempts_markdown(home: Path, run_ids: list[str]) -> str:
    """The chain of attempts, for the step summary."""
    lines = ["### Attempts", "", "| attempt | run | status | ended | resumed from |", "|---|---|---|---|---|"]
    with Store(home) as store:
        for run_id in run_ids:
            run = store.run(run_id)
            record = _record(run)
            attempt = record.attempt if record is not None else None
            if attempt is None:
                lines.append(f"| ? | {run_id} | {run.status} | | |")
            else:
                lines.append(
                    f"| {attempt.number} | {run_id} | {run.status} | {attempt.ending or ''} |"
                    f" {attempt.resumed_from or ''} |"
                )
    return "\n".join(lines) + "\n"
