"""`tftrain run`: Queued → Preparing → Running → PostProcessing → Completed|Failed|Canceled|TimedOut."""

from __future__ import annotations

import json
import signal
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from runner.telemetry.diagnose import ScriptError, last_traceback, tail_text
from runner.errors import (
    DiskFullError,
    FatalError,
    TrainingCanceled,
    TrainingFailed,
    TrainingTimedOut,
)
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LogPump, first_disk_full
from runner.manifest import LoadedManifest, effective_target
from runner.telemetry.metricsfile import MetricsFileFollower, mask_metrics_files
from runner.telemetry.parsers import LogMetricParser
from runner.telemetry.point import MetricPoint
from runner.telemetry.recorder import MetricsRecorder
from runner.telemetry.summary import primary_metric
from runner.paths import tftrain_home
from runner.run.lineage import Lineage
from runner.run.prepare import Prepared, check_runnable, prepare
from runner.run.signals import on_stop_signals
from runner.targets.local.processes import become_subreaper, run_cgroup_name
from runner.history.rundir import RunPaths, writing
from runner.history.record import RunStatus
from runner.history.store import Store
from runner.settings import Settings
from runner.targets.base import Outcome, RunControl, Target
from runner.targets.factory import target_for
from runner.spec import Spec

# What only runs after the training (TensorBoard events, the registry, the rendered summary)
# is imported there: the script starts sooner.
if TYPE_CHECKING:
    from runner.history.registry import ModelVersion

EXIT_CODES = {
    RunStatus.COMPLETED: 0,
    RunStatus.FAILED: TrainingFailed.exit_code,
    RunStatus.TIMED_OUT: TrainingTimedOut.exit_code,
    RunStatus.CANCELED: TrainingCanceled.exit_code,
}


class RunResult(Spec, positional=True):
    run_id: str
    status: RunStatus
    exit_code: int
    message: str | None
    run_dir: Path
    model: ModelVersion | None
    metrics: dict
    ended: Outcome | None = None  # how the training itself ended (runner.run.retry tells a preemption by it)
    stop_signal: int | None = None  # the signal to tftrain that stopped the run, when one did


class RunWatch(Protocol):
    """Who follows a run from outside (a sweep): told its id, control and store once it is recorded
    (to add to its record), and every metric point as it is recorded; `control.reason` +
    `control.cancel` stop it."""

    def started(self, run_id: str, control: RunControl, store: Store) -> None: ...

    def points(self, points: list[MetricPoint]) -> None: ...


def run_manifest(
    loaded: LoadedManifest, logger: Logger, settings: Settings, home: Path | None = None, watch: RunWatch | None = None
) -> RunResult:
    target = target_for(effective_target(loaded.manifest))  # one target serves the run, from check to execute
    checked = check_runnable(loaded, target)  # refuse what cannot run before a run is recorded
    manifest = loaded.manifest
    store = Store(home or tftrain_home(), notify=logger.warning)
    run_id = store.new_run(manifest.name, manifest.model_dump_json(by_alias=True))  # runs/ID and its run.json
    paths = RunPaths.for_run(store.home, run_id, manifest)
    logger.info(f"run {run_id} (queued)  →  {paths.root}", style="bold")
    control = RunControl(
        marker=f"TFTRAIN_RUN_ID={run_id}",
        grace_seconds=manifest.grace_seconds,
        limit_seconds=manifest.max_run_duration_seconds,
    )
    control.cgroup = run_cgroup_name(run_id, store.home)
    become_subreaper()
    try:
        if watch is not None:  # inside: a watch that fails leaves the run Failed, never Queued
            watch.started(run_id, control, store)
        return _run(loaded, target, checked, store, run_id, paths, control, logger, settings, watch)
    except BaseException as exc:
        if not store.run(run_id).finished:  # a bug, a full disk, or KeyboardInterrupt outside the phases
            if isinstance(exc, FatalError):
                store.finish(run_id, RunStatus.FAILED, exc.exit_code, logger.masker.text(str(exc)))
            else:
                store.finish(run_id, RunStatus.FAILED, 1, logger.masker.text(f"internal error: {type(exc).__name__}: {exc}"))
        raise
    finally:
        store.close()


def _run(
    loaded, target: Target, checked, store: Store, run_id: str, paths: RunPaths, control: RunControl, logger: Logger, settings: Settings,
    watch: RunWatch | None,
) -> RunResult:
    manifest = loaded.manifest
    session = _Session(store, run_id, logger)
    outcome, failure, prepared, lineage, probe = None, None, None, None, None
    with _signals(control, logger), ExitStack() as held, ExitStack() as probing:
        try:
            # Queued until the target has room (the pool's leases); held until Running ends
            state = held.enter_context(target.reserve(loaded, checked, run_id, control, logger))
            with session.phase(RunStatus.PREPARING):
                syncing = _checkpoint_sync(loaded, paths, run_id, logger)  # an unusable bucket stops the run here
                prepared = prepare(loaded, target, state, run_id, paths, store, logger, settings)
            lineage = Lineage(
                loaded, paths, prepared.env, prepared.plan, prepared.inputs,
                keep_git=lambda git: store.update_run(run_id, git=git), warn=logger.warning,  # `tftrain runs` lists the commit
            )
            control.started = lineage.record
        except FatalError as exc:
            failure, outcome = exc, Outcome(_failed_as(exc), None, str(exc))
        paths.create()
        recorder = MetricsRecorder(
            paths.metrics, manifest.metrics, logger.metrics, logger.masker, logger.warning, observe=watch.points if watch else None
        )
        if prepared is not None:
            if control.cancel.is_set():
                outcome = Outcome(RunStatus.CANCELED, None, control.reason or "canceled before the training started")
            else:
                try:
                    # the gate's process, until the end of PostProcessing (a target may start it with the training)
                    probe = probing.enter_context(target.probing(prepared.env, paths, warm=manifest.model.gated))
                    with session.phase(RunStatus.RUNNING), syncing:  # a last sync as Running ends
                        outcome = _script_verdict(_execute(target, prepared, paths, recorder, control, logger), recorder)
                except FatalError as exc:  # the target could not run it (a daemon or cluster refused)
                    failure, outcome = exc, Outcome(RunStatus.FAILED, None, str(exc))
        held.close()
        if lineage is not None:
            lineage.record()  # where the plan never started
        git = lineage.git if lineage else {}
        with _naming_first(failure), session.phase(RunStatus.POST_PROCESSING):
            model, summary, points, refused = _post_process(loaded, paths, recorder, outcome, run_id, git, store, logger, (prepared, probe))
        if refused is not None and failure is None:  # the training ended well; keeping its results did not
            failure, outcome = refused, Outcome(RunStatus.FAILED, None, str(refused))
    # tftrain's own failure speaks for itself; a script's is found in its logs
    message, script_error = (outcome.message, None) if failure else _explain(outcome, paths, prepared)
    message = logger.masker.text(message) if message else message  # stored: the DB, run.json, summary.md
    status = outcome.status
    exit_code = failure.exit_code if failure else EXIT_CODES[status]
    store.finish(run_id, status, exit_code, message)
    result = RunResult(run_id, status, exit_code, message, paths.root, model, summary, outcome, control.stop_signal)
    with _naming_first(failure):
        markdown = _write_record(paths, store, result, git, points)
    logger.info(f"run {run_id}: {status}" + (f": {message}" if message else ""), style="bold green" if exit_code == 0 else "bold red")
    _report(logger, loaded, result, script_error, markdown)
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


def _checkpoint_sync(loaded, paths: RunPaths, run_id: str, logger: Logger):
    """The checkpoint sync around Running (runner.run.checkpoints: S3, only when the manifest asks)."""
    if loaded.manifest.checkpoints is None:
        return nullcontext()
    from runner.run.checkpoints import checkpoint_sync

    return checkpoint_sync(loaded, paths, run_id, logger)


def _script_verdict(outcome: Outcome, recorder: MetricsRecorder) -> Outcome:
    """A script that said it failed (Azure's run.fail()) failed, whatever its exit code."""
    if outcome.status == RunStatus.COMPLETED and recorder.verdict is not None:
        error = recorder.verdict["error"]
        return Outcome(RunStatus.FAILED, None, "the script marked the run failed (run.fail())" + (f": {error}" if error else ""))
    return outcome


def _failed_as(exc: FatalError) -> RunStatus:
    return RunStatus.CANCELED if isinstance(exc, TrainingCanceled) else RunStatus.FAILED


class _Session:
    def __init__(self, store: Store, run_id: str, logger: Logger) -> None:
        self.store, self.run_id, self.logger = store, run_id, logger

    @contextmanager
    def phase(self, name: RunStatus):
        self.store.start_phase(self.run_id, name)
        self.logger.phase(name)
        started = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            self.logger.phase_done(name, time.monotonic() - started, ok)


def _execute(target: Target, prepared: Prepared, paths: RunPaths, recorder: MetricsRecorder, control: RunControl, logger: Logger) -> Outcome:
    plan = prepared.plan
    regexes = recorder.summary.spec.regex
    pump = LogPump(logger, paths.logs, prefix_ranks=len(plan.tasks) > 1, secrets=prepared.secrets)
    sinks = {rank: LogMetricParser(regexes, recorder.record, rank).feed for rank in plan.metrics_ranks}
    followers = [
        MetricsFileFollower(paths.metrics_file(rank), recorder.record, logger.warning, rank, recorder.note) for rank in plan.metrics_ranks
    ]
    for follower in followers:
        follower.start()
    for name, content in plan.files.items():
        paths.launch_dir.mkdir(exist_ok=True)
        (paths.launch_dir / name).write_text(content)
    if control.limit_seconds:
        control.deadline = time.monotonic() + control.limit_seconds
    try:
        outcome = target.execute(plan, pump, sinks, control, logger)
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
    for task in plan.tasks:
        log = paths.rank_log(task.rank)
        lines = (tail_text(log) or "").splitlines()[-RANK_TAIL_LINES:]
        with logger.group(f"{task.label} — last {len(lines)} lines of {log.name}"):
            logger.text("\n".join(lines) or "(no output)")


def _post_process(loaded, paths, recorder, outcome, run_id, git, store, logger, ran):
    from runner.telemetry.tensorboard import event_scalar_batches
    from runner.telemetry.report import show_metrics

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
        return _register(loaded, paths, outcome, run_id, git, store, logger, summary, ran), summary, points, None
    except FatalError as exc:  # refused or out of space: the run fails, its record is still written
        return None, summary, points, exc


def _register(loaded, paths, outcome, run_id, git, store, logger, summary, ran) -> ModelVersion | None:
    """On Completed, the model at model.path passes the gate (runner.serving.gate) and becomes the
    next version (odd entries skipped, listed)."""
    from runner.history.registry import Registry
    from runner.serving.gate import run_gate

    model = None
    spec = loaded.manifest.model
    model_path = paths.workdir / spec.path
    if outcome.status == RunStatus.COMPLETED and spec.register_model:
        if model_path.exists():
            prepared, probe = ran
            gate = run_gate(loaded, paths, probe, prepared.env, logger)  # ModelGateError: nothing is registered
            info = {
                "run_id": run_id,
                "metrics": summary,
                "framework": spec.framework,
                "framework_version": spec.framework_version or loaded.manifest.framework_version,
                "git": git,
                "serving_resources": spec.serving.model_dump(),
            }
            if gate is not None:
                info["serving"] = gate.serving
            model = Registry(store).register(loaded.manifest.name, model_path, run_id, info, gate.files() if gate else None)
            logger.info(f"registered model {model.label} ({model.info['files']} files)", style="bold green")
            if model.skipped:
                logger.warning(model.skipped_note(str(spec.path)))
        else:
            logger.warning(f"model.path {spec.path} was not written by the script; no model registered")
    elif model_path.exists() and spec.register_model:
        logger.info(f"model not registered (run {outcome.status}); it is kept at {model_path}")
    return model


def _explain(outcome: Outcome, paths: RunPaths, prepared: Prepared | None) -> tuple[str | None, ScriptError | None]:
    """The run's message, and the script's error (file and line in the source) when there is one."""
    if outcome.status != RunStatus.FAILED or prepared is None:
        return outcome.message, None
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


def _report(logger: Logger, loaded: LoadedManifest, result: RunResult, error: ScriptError | None, markdown: str) -> None:
    """Annotations, the step summary (summary.md's text) and the step's outputs, when running in GitHub Actions."""
    if result.status == RunStatus.FAILED:
        if error is not None:  # point at the user's file and line in the checkout
            logger.annotate("error", error.message, logger.workspace_path(loaded.source_dir / error.file), error.line)
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


def _write_record(paths: RunPaths, store: Store, result: RunResult, git: dict, points: list) -> str:
    """The results join run.json (kept by the store from the start); summary.md is written and its text returned."""
    from runner.telemetry.report import summary_markdown

    model = result.model.label if result.model else None
    store.update_run(result.run_id, model=model, metrics=result.metrics, git=git)
    phases = store.phases(result.run_id)
    markdown = summary_markdown(result.run_id, result.status, result.message, phases, result.metrics, model, git, points)
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
