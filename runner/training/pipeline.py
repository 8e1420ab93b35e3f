"""`tftrain run`: Queued → Preparing → Running → PostProcessing → Completed|Failed|Canceled|TimedOut."""

from __future__ import annotations

import json
import signal
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from runner.errors import DiskFullError, FatalError, TrainingCanceled, TrainingFailed, TrainingTimedOut
from runner.history.rundir import RunPaths, writing
from runner.history.states import RunStatus
from runner.history.store import Store
from runner.manifest import LoadedManifest, effective_target
from runner.manifest.legacy_keras import opt_out_hint
from runner.settings import Settings
from runner.targets.base import Outcome, RunControl
from runner.targets.containment import contain_run
from runner.targets.factory import target_for
from runner.targets.leftovers import reconcile
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LogPump, first_disk_full
from runner.telemetry.metricsfile import MetricsFileFollower, mask_metrics_files
from runner.telemetry.parsers import LogMetricParser
from runner.telemetry.point import MetricPoint
from runner.telemetry.recorder import MetricsRecorder
from runner.telemetry.summary import primary_metric
from runner.training.context import Kept, RunContext, RunWatch, Session, Training
from runner.training.lineage import Lineage
from runner.training.metering import metering
from runner.training.prepare import Prepared, check_runnable, prepare
from runner.training.registering import register_model
from runner.training.signals import on_stop_signals

# What only runs after the training (TensorBoard events, the registry, the rendered summary)
# is imported there: the script starts sooner.
if TYPE_CHECKING:
    from runner.history.model_registry import ModelVersion
    from runner.telemetry.diagnose import ScriptError

EXIT_CODES = {
    RunStatus.COMPLETED: 0,
    RunStatus.FAILED: TrainingFailed.exit_code,
    RunStatus.TIMED_OUT: TrainingTimedOut.exit_code,
    RunStatus.CANCELED: TrainingCanceled.exit_code,
}


class RunResult(NamedTuple):
    run_id: str
    status: RunStatus
    exit_code: int
    message: str | None
    run_dir: Path
    model: ModelVersion | None
    metrics: dict
    ended: Outcome | None = None  # how the training itself ended (runner.training.retry tells a preemption by it)
    stop_signal: int | None = None  # the signal to tftrain that stopped the run, when one did


def run_manifest(
    loaded: LoadedManifest, logger: Logger, settings: Settings, home: Path, watch: RunWatch | None = None
) -> RunResult:
    target = target_for(effective_target(loaded.manifest), settings)  # one target serves the run, from check to execute
    checked = check_runnable(loaded, target)  # refuse what cannot run before a run is recorded
    manifest = loaded.manifest
    store = Store(home, notify=logger.warning)
    reconcile(store)  # a lost run's leftovers must not train beside this one
    run_id = store.new_run(manifest.name, manifest.model_dump_json(by_alias=True))  # runs/ID and its run.json
    paths = RunPaths.for_run(store.home, run_id, manifest)
    logger.info(f"run {run_id} (queued)  →  {paths.root}", style="bold")
    control = RunControl(
        marker=f"TFTRAIN_RUN_ID={run_id}",
        grace_seconds=manifest.grace_seconds,
        limit_seconds=manifest.max_run_duration_seconds,
        archive_limits=settings.archive_limits,
    )
    contain_run(control, run_id, store.home)
    ctx = RunContext(loaded, target, checked, store, run_id, paths, control, logger, settings, watch)
    try:
        if watch is not None:  # inside: a watch that fails leaves the run Failed, never Queued
            watch.started(run_id, control, store)
        return _run(ctx)
    except BaseException as exc:
        if not store.run(run_id).finished:  # a bug, a full disk, or KeyboardInterrupt outside the phases
            if isinstance(exc, FatalError):
                store.finish(run_id, RunStatus.FAILED, exc.exit_code, logger.masker.text(str(exc)))
            else:
                store.finish(
                    run_id, RunStatus.FAILED, 1, logger.masker.text(f"internal error: {type(exc).__name__}: {exc}")
                )
        raise
    finally:
        store.close()


def _run(ctx: RunContext) -> RunResult:
    session = Session(ctx.store, ctx.run_id, ctx.logger)
    with _signals(ctx.control, ctx.logger), ExitStack() as held, ExitStack() as probing:
        training = _prepare(ctx, session, held)
        ctx.paths.create()
        training.recorder = MetricsRecorder(
            ctx.paths.metrics,
            ctx.manifest.metrics,
            ctx.logger.metrics,
            ctx.logger.masker,
            ctx.logger.warning,
            observe=ctx.watch.points if ctx.watch else None,
        )
        if training.prepared is not None:
            _train(ctx, session, training, probing)
        held.close()
        if training.lineage is not None:
            training.lineage.record()  # where the plan never started
        with _naming_first(training.failure), session.phase(RunStatus.POST_PROCESSING):
            kept = _post_process(ctx, training)
        # the training ended well; keeping its results did not
        if kept.refused is not None and training.failure is None:
            training.failed(kept.refused, RunStatus.FAILED)
    return _conclude(ctx, training, kept)


def _prepare(ctx: RunContext, session: Session, held: ExitStack) -> Training:
    """Queued until the target has room (the pool's leases; held on `held` until Running ends), then
    Preparing. A refusal is the run's failure, kept in the Training it returns."""
    training = Training()
    try:
        state = held.enter_context(ctx.target.reserve(ctx.loaded, ctx.checked, ctx.run_id, ctx.control, ctx.logger))
        with session.phase(RunStatus.PREPARING):
            training.syncing = _checkpoint_sync(ctx)  # an unusable bucket stops the run here
            training.prepared = prepared = prepare(
                ctx.loaded, ctx.target, state, ctx.run_id, ctx.paths, ctx.store, ctx.logger, ctx.settings
            )
        training.lineage = Lineage(
            ctx.loaded,
            ctx.paths,
            prepared.env,
            prepared.plan,
            prepared.inputs,
            keep_git=lambda git: ctx.store.update_run(ctx.run_id, git=git),
            warn=ctx.logger.warning,  # `tftrain runs` lists the commit
        )
        ctx.control.started = training.lineage.record
    except FatalError as exc:
        training.failed(exc, _failed_as(exc))
    return training


def _train(ctx: RunContext, session: Session, training: Training, probing: ExitStack) -> None:
    """Running, unless the run was canceled while it was prepared; the gate's process starts on
    `probing` and lives until the end of PostProcessing (a target may start it with the training)."""
    if ctx.control.cancel.is_set():
        training.outcome = Outcome(
            RunStatus.CANCELED, None, ctx.control.reason or "canceled before the training started"
        )
        return
    try:
        prepared = training.prepared
        training.probe = probing.enter_context(
            ctx.target.probing(prepared.env, ctx.paths, warm=ctx.manifest.model.gated)
        )
        with (
            session.phase(RunStatus.RUNNING, ctx.control),
            training.syncing,
            metering(ctx, training),
        ):  # a last sync as Running ends
            training.outcome = _script_verdict(_execute(ctx, prepared, training.recorder), training.recorder)
    except FatalError as exc:  # the target could not run it (a daemon or cluster refused)
        training.failed(exc, RunStatus.FAILED)


def _conclude(ctx: RunContext, training: Training, kept: Kept) -> RunResult:
    """The run's end: its status and message recorded, run.json and summary.md completed, reported."""
    failure, outcome, logger = training.failure, training.outcome, ctx.logger
    # tftrain's own failure speaks for itself; a script's is found in its logs
    message, script_error = (outcome.message, None) if failure else _explain(outcome, ctx.paths, training.prepared)
    message = logger.masker.text(message) if message else message  # stored: the DB, run.json, summary.md
    hint = opt_out_hint(ctx.manifest, message) if script_error else None
    if hint:  # Keras 3's fit failed where tftrain would have used tf-keras
        logger.warning(hint)
    status = outcome.status
    exit_code = failure.exit_code if failure else EXIT_CODES[status]
    cause = ctx.control.cause if status == RunStatus.CANCELED else None  # stopped by a sweep's policy, not a signal
    ctx.store.finish(ctx.run_id, status, exit_code, message, cause)
    result = RunResult(
        ctx.run_id,
        status,
        exit_code,
        message,
        ctx.paths.root,
        kept.model,
        kept.summary,
        outcome,
        ctx.control.stop_signal,
    )
    with _naming_first(failure):
        markdown = _write_record(ctx, result, training.git, kept.points, training.usage)
    logger.info(
        f"run {ctx.run_id}: {status}" + (f": {message}" if message else ""),
        style="bold green" if exit_code == 0 else "bold red",
    )
    _report(ctx, result, script_error, markdown)
    return result


@contextmanager
def _naming_first(failure: FatalError | None):
    """A full disk met again later (run.json, metrics.json) is the same full disk: the run's error
    names the file that failed first."""
    try:
        yield
    except DiskFullError:
        if isinstance(failure, DiskFullError):
            raise failure from None
        raise


def _checkpoint_sync(ctx: RunContext):
    """The checkpoint sync around Running (runner.training.checkpoints: S3, only when the manifest asks)."""
    if ctx.manifest.checkpoints is None:
        return nullcontext()
    from runner.training.checkpoints import checkpoint_sync

    return checkpoint_sync(ctx.loaded, ctx.paths, ctx.run_id, ctx.logger)


def _script_verdict(outcome: Outcome, recorder: MetricsRecorder) -> Outcome:
    """A script that said it failed (Azure's run.fail()) failed, whatever its exit code."""
    if outcome.status == RunStatus.COMPLETED and recorder.verdict is not None:
        error = recorder.verdict["error"]
        return Outcome(
            RunStatus.FAILED, None, "the script marked the run failed (run.fail())" + (f": {error}" if error else "")
        )
    return outcome


def _failed_as(exc: FatalError) -> RunStatus:
    return RunStatus.CANCELED if isinstance(exc, TrainingCanceled) else RunStatus.FAILED


def _execute(ctx: RunContext, prepared: Prepared, recorder: MetricsRecorder) -> Outcome:
    paths, control, logger = ctx.paths, ctx.control, ctx.logger
    plan = prepared.plan
    regexes = recorder.summary.spec.regex
    pump = LogPump(logger, paths.logs, prefix_ranks=len(plan.tasks) > 1, secrets=prepared.secrets)
    sinks = {rank: LogMetricParser(regexes, recorder.record, rank).feed for rank in plan.metrics_ranks}
    followers = [
        MetricsFileFollower(paths.metrics_file(rank), recorder.record, logger.warning, rank, recorder.note)
        for rank in plan.metrics_ranks
    ]
    for follower in followers:
        follower.start()
    for name, content in plan.files.items():
        paths.launch_dir.mkdir(exist_ok=True)
        (paths.launch_dir / name).write_text(content)
    control.start_clock()
    try:
        outcome = ctx.target.execute(plan, pump, sinks, control, logger)
    except DiskFullError as exc:  # a later write (run.json) that failed for the space a log lacked first
        raise first_disk_full((pump, recorder), "was stopped", before=time.monotonic()) or exc from None
    finally:
        for follower in followers:
            follower.stop()
        mask_metrics_files(paths.metrics_dir, logger.masker, logger.warning)
        if logger.github and len(plan.tasks) > 1:
            _rank_groups(logger, plan, paths)
    # a log or metrics.jsonl that could not be written in full: the run keeps what it has, and fails
    full = first_disk_full((pump, recorder), outcome.status.lower())
    if full is not None:
        raise full
    return outcome


RANK_TAIL_LINES = 200


def _rank_groups(logger: Logger, plan, paths: RunPaths) -> None:
    """In GitHub's log the ranks' lines arrive interleaved; each rank's own tail, folded, reads better."""
    from runner.telemetry.diagnose import tail_text

    for task in plan.tasks:
        log = paths.rank_log(task.rank)
        lines = (tail_text(log) or "").splitlines()[-RANK_TAIL_LINES:]
        with logger.group(f"{task.label} — last {len(lines)} lines of {log.name}"):
            logger.text("\n".join(lines) or "(no output)")


def _post_process(ctx: RunContext, training: Training) -> Kept:
    from runner.telemetry.report import show_metrics
    from runner.telemetry.tensorboard import event_scalar_batches

    paths, recorder, logger = ctx.paths, training.recorder, ctx.logger
    if paths.logs.exists():
        try:
            for batch in event_scalar_batches(paths.logs):
                recorder.record(batch)
        except Exception as exc:  # a damaged event file must not lose the rest of the run
            logger.warning(f"could not read TensorBoard event files under {paths.logs}: {exc}")
    points = recorder.close()
    summary = recorder.as_dict()
    show_metrics(logger, summary)
    try:
        with writing(paths.metrics_summary):
            paths.metrics_summary.write_text(json.dumps(summary, indent=2) + "\n")
        return Kept(register_model(ctx, training, summary), summary, points)
    except FatalError as exc:  # refused or out of space: the run fails, its record is still written
        return Kept(None, summary, points, exc)


def _explain(outcome: Outcome, paths: RunPaths, prepared: Prepared | None) -> tuple[str | None, ScriptError | None]:
    """The run's message, and the script's error (file and line in the source) when there is one."""
    if outcome.status != RunStatus.FAILED or prepared is None:
        return outcome.message, None
    from runner.telemetry.diagnose import last_traceback  # a failed script's error: after its end

    tasks = prepared.plan.tasks
    if outcome.rank is not None and outcome.rank >= 0:  # the task that failed first, else every rank
        tasks = [task for task in tasks if task.rank == outcome.rank]
    script = prepared.plan.tasks[0].argv[1] if len(prepared.plan.tasks[0].argv) > 1 else "the script"
    for task in tasks:
        error = last_traceback(paths.rank_log(task.rank), Path(task.cwd))
        if error:
            return f"{error} (rank {task.rank}: {outcome.message}; log: {paths.rank_log(task.rank)})", error
    log = paths.rank_log(tasks[0].rank if tasks else 0)
    return f"{script} {outcome.message} (log: {log})", None


def _report(ctx: RunContext, result: RunResult, error: ScriptError | None, markdown: str) -> None:
    """Annotations, the step summary (summary.md's text) and the step's outputs, when running in GitHub Actions."""
    logger = ctx.logger
    if result.status == RunStatus.FAILED:
        if error is not None:  # point at the user's file and line in the checkout
            logger.annotate(
                "error", error.message, logger.workspace_path(ctx.loaded.source_dir / error.file), error.line
            )
        else:
            logger.annotate("error", f"run {result.run_id} failed: {result.message}")
    elif result.status != RunStatus.COMPLETED:
        logger.annotate("error", f"run {result.run_id} {result.status}: {result.message}")
    logger.step_summary(markdown)
    _, value = primary_metric(result.metrics)
    logger.outputs(
        {
            "run-id": result.run_id,
            "status": result.status.value,
            "primary-metric": "" if value is None else str(value),
            "metrics": json.dumps(result.metrics, sort_keys=True),
            "model-version": result.model.label if result.model else "",
        }
    )


def _write_record(ctx: RunContext, result: RunResult, git: dict, points: list[MetricPoint], usage=None) -> str:
    """The results join run.json (kept by the store from the start); summary.md is written and its text returned."""
    from runner.telemetry.report import summary_markdown

    paths, store = ctx.paths, ctx.store
    model = result.model.label if result.model else None
    store.update_run(result.run_id, model=model, metrics=result.metrics, git=git, **({"usage": usage} if usage else {}))
    phases = store.phases(result.run_id)
    markdown = summary_markdown(
        result.run_id, result.status, result.message, phases, result.metrics, model, git, points, usage
    )
    if ctx.manifest.model.replay is not None:
        from runner.replay.section import replay_markdown

        markdown += replay_markdown(paths.serving)
    with writing(paths.summary):
        paths.summary.write_text(markdown)
    return markdown


def _signals(control: RunControl, logger: Logger):
    """SIGINT/SIGTERM/SIGHUP cancel the run (post-processing still happens); a second one kills at
    once, also while the training's grace period runs (the local target watches `control.force`)."""

    def handler(sig: signal.Signals) -> None:
        if control.cancel.is_set():
            control.force.set()
            logger.warning("second signal: killing the training now")
        else:
            control.cancel.set()
            control.stop_signal = sig
            logger.warning(f"{sig.name}: stopping the training (again to kill at once)")

    return on_stop_signals(handler)
