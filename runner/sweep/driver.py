"""`tftrain run` on a manifest with `sweep:`: trials asked of the study and run up to
max_concurrent_trials at once, each a full run; the sweep's clock (limits.timeout) and Ctrl-C stop
them all; the best trial's model becomes the next version of the model."""

from __future__ import annotations

import dataclasses
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from runner.errors import BudgetPassed, BudgetReached, FatalError, StorageError, SweepError
from runner.history.states import RunStatus
from runner.manifest import LoadedManifest
from runner.settings import Settings
from runner.sweep.book import SweepBook, SweepStatus
from runner.sweep.outcome import TrialResult, tell
from runner.sweep.placement import check_concurrency, gpu_shares
from runner.sweep.study import CANCELED_BY_SIGNAL, RESUMES, Sweep
from runner.sweep.trial import TrialWatch, run_trial, trial_manifest
from runner.telemetry.logger import Logger
from runner.telemetry.usage_budget import Go, SweepBudget, report_sweep_costs, seed, usage_of_run
from runner.training.signals import on_stop_signals

TICK_SECONDS = 0.5
Evidence = Callable[[str], "dict[str, Path] | None"]  # a run id → the files kept beside its model
LIVE_SECONDS = 2.0  # the live table's steps and values are redrawn this often


class SweepRunner:
    def __init__(
        self,
        loaded: LoadedManifest,
        sweep: Sweep,
        logger: Logger,
        settings: Settings,
        home: Path,
        environ: Mapping[str, str],
        gpus: list[str] | None = None,
        evidence: Evidence | None = None,
    ) -> None:
        """`gpus`: those the trials may use, split between them (runner.sweep.placement); `evidence`:
        the files an `evaluation:` keeps beside the best trial's model (runner.verdict.sweeps)."""
        self.loaded, self.sweep, self.logger, self.settings, self.home = loaded, sweep, logger, settings, home
        self.gpus = gpus or []
        self.environ = environ
        self.spec = loaded.manifest.sweep
        self.book = SweepBook(
            home, sweep, register=loaded.manifest.model.register_model, gate=self._gate, evidence=evidence
        )
        self.lock = threading.Lock()  # one ask at a time: the limit is checked and the trial made together
        self.turn = threading.Condition(self.lock)  # a worker the budget keeps waiting is woken when a trial ends
        self.deadline: float | None = None  # limits.timeout: no trial starts after it
        self.stop = threading.Event()
        self.canceled = False  # stopped by a signal (not its timeout or a failure): resume runs its trials again
        self.watches: dict[int, TrialWatch] = {}
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.failure: FatalError | None = None  # what stopped the sweep, with its own exit code
        self.finished_one = False
        self.budget = SweepBudget.of(self.spec.limits)  # max_gpu_hours / max_cost: asked before each trial starts
        self.budget_stop: str | None = None  # why the budget stopped the sweep, when it did
        if self.budget is not None:
            seed(self.budget, home, self.book.trials())
        self.arrays = _sweep_batcher(
            loaded, settings, self.book.root, sweep.sweep_id, self.spec.limits.max_concurrent_trials
        )

    def _gate(self, run_id: str):
        """The model gate for the best trial's run, before its model is registered."""
        from runner.serving.gate import gate_finished

        return gate_finished(self.loaded, self.home, run_id, self.logger)

    def run(self) -> SweepStatus:
        self.logger.info(
            f"sweep {self.sweep.sweep_id}: up to {self.sweep.limit} trials, {self.spec.limits.max_concurrent_trials} at"
            " once",
            style="bold",
        )
        concurrent = min(self.spec.limits.max_concurrent_trials, self.sweep.limit)
        shares = gpu_shares(self.gpus, concurrent)
        if shares[0] is not None:  # each worker's trials run on its own GPUs
            self.logger.info(f"sweep {self.sweep.sweep_id}: each trial on its own GPUs: " + "; ".join(shares))
        workers = [
            threading.Thread(target=self._worker, args=(share,), name=f"trials-{n}", daemon=True)
            for n, share in enumerate(shares)
        ]
        deadline = self.deadline = time.monotonic() + self.spec.limits.timeout if self.spec.limits.timeout else None
        with _signals(self):
            for worker in workers:
                worker.start()
            drawn = 0.0
            while any(worker.is_alive() for worker in workers):
                if self._show_events() or (self.logger.tty and time.monotonic() - drawn >= LIVE_SECONDS):
                    if self.logger.tty:  # a terminal: the live table; elsewhere a line per trial
                        self.book.show_live(self.logger)
                        drawn = time.monotonic()
                if deadline is not None and time.monotonic() >= deadline and not self.stop.is_set():
                    self.halt(f"sweep timeout ({self.spec.limits.timeout}s) reached", by_signal=False)
                for worker in workers:
                    worker.join(TICK_SECONDS / len(workers))
            self._show_events()
        if self.failure is not None:
            raise self.failure
        passed = self.budget.passed() if self.budget is not None else None
        return self.book.finish(canceled=self.canceled, budget_stop=self.budget_stop, budget_passed=passed)

    def halt(self, why: str, by_signal: bool, resumable: bool | None = None) -> None:
        """Stop asking for trials and stop the running ones; `resumable` (a signal's stop, a lost
        storage): `tftrain sweep resume` runs them again."""
        self.canceled = self.canceled or by_signal
        self.stop.set()
        self.logger.warning(f"sweep {self.sweep.sweep_id}: {why}: stopping its trials")
        with self.lock:
            watches = list(self.watches.values())
            self.turn.notify_all()  # a worker the budget keeps waiting stops now
        for watch in watches:
            # marked before it is stopped: told Failed, it is still one to run again
            if by_signal if resumable is None else resumable:
                try:
                    watch.trial.set_user_attr("stopped", CANCELED_BY_SIGNAL)
                except Exception:  # it ended meanwhile (told already), or the storage is gone: nothing to resume
                    pass
            watch.stop(why)

    # --- a worker: ask, run, tell, until the limit or a stop --------------------------------------
    def _worker(self, gpus: str | None) -> None:
        """`gpus`: this worker's share of the GPUs (CUDA_VISIBLE_DEVICES for its trials), None: as tftrain's."""
        settings = self.settings if gpus is None else dataclasses.replace(self.settings, cuda_visible_devices=gpus)
        try:
            while not self.stop.is_set():
                asked = self._ask()
                if asked is None:
                    return
                trial, values, watch = asked
                self.events.put(("started", trial.number, values))
                manifest = trial_manifest(self.loaded, values, self.sweep.objective, self.spec.limits.trial_timeout)
                resumes = trial.user_attrs.get(RESUMES)
                if resumes:
                    manifest = trial_manifest_resuming(manifest, resumes)
                ticket = self.arrays.opened() if self.arrays is not None else None  # its place in an array job
                try:
                    result = run_trial(
                        manifest,
                        watch,
                        self.book.trial_log(trial.number),
                        dataclasses.replace(settings, slurm_array=ticket),
                        self.home,
                        self.environ,
                    )
                finally:
                    if ticket is not None:
                        ticket.close()
                if self.budget is not None:
                    self.budget.add(result.run_id, usage_of_run(self.home, result.run_id))
                with self.lock:
                    self.watches.pop(trial.number, None)
                    self.turn.notify_all()
                if watch.failure is not None:  # its reports could not be stored: the storage is gone
                    raise watch.failure
                self._tell(trial, result)
                self.events.put(("ended", trial.number, result))
        except Exception as exc:  # a storage that went away: the sweep stops, its trials with it
            if self.failure is None:
                self.failure = self._failure(exc)
            self.halt(str(self.failure), by_signal=False, resumable=isinstance(self.failure, StorageError))

    def _failure(self, exc: Exception) -> FatalError:
        """What stopped a worker, as the error tftrain ends with: a storage failure is a StorageError
        naming the storage (exit 18; `tftrain sweep resume` goes on once it is back), the rest a SweepError."""
        if isinstance(exc, FatalError):
            return exc
        lost = self.sweep.place.error(exc)
        if lost is not None:
            return StorageError(f"{lost}; `tftrain sweep resume {self.sweep.sweep_id}` goes on once it answers again")
        return SweepError(f"sweep {self.sweep.sweep_id}: {type(exc).__name__}: {_first_line(exc)}")

    def _ask(self):
        """The next trial, its values and its watch (counted among the running at once), or None: the
        sweep is stopped, at max_total_trials, past its timeout, or its budget allows no more. Waits
        while the budget waits for running trials."""
        with self.lock:
            while True:
                if self.stop.is_set() or self.sweep.counted() >= self.sweep.limit:
                    return None
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return None  # the main loop halts the sweep within a tick: nothing starts meanwhile
                if self.budget is None:
                    break
                verdict = self.budget.next_trial(running=len(self.watches))
                if verdict.go == Go.START:
                    break
                if verdict.go == Go.STOP:  # nothing is running; no other trial starts
                    self.budget_stop = verdict.line
                    self.stop.set()
                    self.turn.notify_all()
                    self.logger.warning(f"sweep {self.sweep.sweep_id}: {verdict.line}")
                    return None
                self.turn.wait(TICK_SECONDS)  # a running trial ends, or a stop
            trial = self.sweep.study.ask()
            values = self.sweep.space.suggest(trial)
            trial.set_user_attr("values", values)
            # running from now: the next ask, the budget's included, counts it before its run starts
            watch = self.watches[trial.number] = TrialWatch(trial, self.sweep.objectives, self.sweep.sweep_id)
            return trial, values, watch

    def _tell(self, trial, result: TrialResult) -> None:
        tell(self.sweep.study, trial, result)
        if result.status == RunStatus.COMPLETED and (result.value is None or result.missing) and not self.finished_one:
            missing = ", ".join(map(repr, result.missing or (self.sweep.objective.primary_metric,)))
            seen = ", ".join(result.reported) or "none"
            self.failure = SweepError(
                f"sweep.objective.primary_metric: trial {trial.number} (run {result.run_id}) completed without"
                f" reporting {missing}; it reported: {seen}"
            )
            self.halt("the objective metric is never reported", by_signal=False)
        if result.status == RunStatus.COMPLETED:
            self.finished_one = True
        self.book.save()

    def _show_events(self) -> bool:
        """Whether there were any: a trial started or ended."""
        shown = False
        while True:
            try:
                kind, number, detail = self.events.get_nowait()
            except queue.Empty:
                return shown
            shown = True
            if self.logger.tty:
                continue  # the live table says it
            if kind == "started":
                params = "  ".join(f"{key}={value}" for key, value in detail.items())
                self.logger.info(f"trial {number} started: {params}")
            else:
                self.book.show_trial(self.logger, number, detail)


def _first_line(exc: Exception) -> str:
    """SQLAlchemy's errors run to the SQL and a link; the first line says what went wrong."""
    return (str(exc).strip().splitlines() or [""])[0]


def _sweep_batcher(loaded: LoadedManifest, settings: Settings, root: Path, sweep_id: str, throttle: int):
    """What the trials hand their submissions to, where the target batches them (Slurm's array jobs:
    Target.sweep_batcher); None: each trial submits its own."""
    from runner.manifest import effective_target
    from runner.targets.factory import target_for

    return target_for(effective_target(loaded.manifest), settings).sweep_batcher(loaded, root, sweep_id, throttle)


def trial_manifest_resuming(loaded: LoadedManifest, run_id: str) -> LoadedManifest:
    return loaded._replace(manifest=loaded.manifest.model_copy(update={"resume_from": run_id}))


def _signals(runner: SweepRunner):
    """SIGINT/SIGTERM/SIGHUP stop the sweep and its trials (they end Canceled; `tftrain sweep resume`
    runs them again); a second one kills the trials at once."""

    def handler(sig: signal.Signals) -> None:
        if runner.canceled:
            with runner.lock:
                for watch in runner.watches.values():
                    if watch.control is not None:
                        watch.control.force.set()
            return
        runner.halt(f"canceled by {sig.name}, a signal to tftrain", by_signal=True)

    return on_stop_signals(handler)


def check_prices(loaded: LoadedManifest) -> None:
    """sweep.limits.max_cost needs prices on the target the sweep runs on (after --target): compute.cost,
    or the pool file's cost. Refused before any trial runs (exit 3): without them nothing keeps the budget."""
    from runner.errors import ManifestError

    manifest = loaded.manifest
    if manifest.sweep.limits.max_cost is None or manifest.compute.cost is not None:
        return
    from runner.manifest import effective_target
    from runner.shared.catalog import row_of
    from runner.targets.factory import target_for

    where = f"{loaded.path}: sweep.limits.max_cost: a cost budget needs prices"
    target = effective_target(manifest)
    if not row_of(target).own_prices:
        raise ManifestError(f"{where}: set compute.cost (or, with compute.target: pool, cost: in the pool file)")
    if target_for(target).listed_prices(loaded) is None:
        raise ManifestError(
            f"{where}: compute.cost is not set, and the {target} target lists none (cost: in the pool file)"
        )


def run_sweep(
    loaded: LoadedManifest,
    logger: Logger,
    settings: Settings,
    home: Path,
    environ: Mapping[str, str],
    sweep_id: str | None = None,
    resume: bool = False,
    evidence: Evidence | None = None,
) -> dict:
    """A new sweep, or (sweep_id) joining one; `resume`: first queue again the trials a signal stopped,
    each from its run's last checkpoint. Returns the sweep's record (`tftrain sweeps show --json`).
    `environ`: tftrain's environment, read by the CLI: sweep.storage's $NAMEs, the secrets' values."""
    from runner.errors import TrainingCanceled
    from runner.manifest.sweep_rules import objectives_of, trial_limit
    from runner.sweep.study import open_sweep, queue_stopped_trials

    manifest = loaded.manifest
    check_prices(loaded)
    gpus = check_concurrency(manifest, logger, settings.cuda_visible_devices)
    sweep = open_sweep(
        manifest.sweep,
        manifest.name,
        objectives_of(manifest),
        trial_limit(manifest.sweep),
        home,
        environ,
        sweep_id,
        create=not resume,
    )
    with sweep.place.failures():
        if resume:
            for number, run_id in queue_stopped_trials(sweep, home):
                logger.info(
                    f"trial {number} ({run_id}) runs again from its last checkpoint"
                    if run_id
                    else f"trial {number} runs again"
                )
        runner = SweepRunner(loaded, sweep, logger, settings, home, environ, gpus, evidence)
        status = runner.run()
        record = runner.book.document()
        runner.book.report(logger)
        report_sweep_costs(logger, home, record, runner.book.root / "summary.md")
    if runner.book.budget is not None and status not in (SweepStatus.OVER_BUDGET, SweepStatus.STOPPED_BY_BUDGET):
        logger.warning(f"sweep {sweep.sweep_id}: {runner.book.budget}")  # canceled or failed, and over its budget too
    if runner.book.refused is not None:
        raise runner.book.refused
    if status == SweepStatus.CANCELED:
        raise TrainingCanceled(
            f"sweep {sweep.sweep_id} canceled; `tftrain sweep resume {sweep.sweep_id}` goes on from where it stopped"
        )
    if status == SweepStatus.FAILED:
        raise SweepError(
            f"sweep {sweep.sweep_id}: no trial completed with a value of {sweep.objective.primary_metric!r} (see"
            f" `tftrain sweeps show {sweep.sweep_id}`)"
        )
    if status == SweepStatus.OVER_BUDGET:
        raise BudgetPassed(f"sweep {sweep.sweep_id}: {runner.book.budget}")
    if status == SweepStatus.STOPPED_BY_BUDGET:
        raise BudgetReached(f"sweep {sweep.sweep_id} stopped by its budget: {runner.book.budget}")
    return record
