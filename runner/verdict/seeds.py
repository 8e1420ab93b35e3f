"""`evaluation.seeds`: the candidate trained several times from one snapshot, each run a seed.

Every seed is a full run of the manifest (its own run id, logs, retries and usage) with
TFTRAIN_SEED = 0, 1, … in its environment and, unless `evaluation.set_seed: false`, the frameworks
seeded from it before the script's first line (runner/compat/startup). They run at once where the
target has room: on this machine as many as its GPUs (each seed its own), slots and CPUs allow, or
`evaluation.max_concurrent`; a pool's leases, Slurm and Kubernetes queue the rest. Seed 0 is the
run: its console is tftrain's, its model is the one registered, once every seed has ended and given
its evidence (kept in its run as evaluation/seed-N.jsonl, and in the version beside the model). The
other seeds' consoles go to their run directories (tftrain.log). A signal stops every seed.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from runner.errors import FatalError
from runner.history.states import RunStatus
from runner.history.store import Store
from runner.manifest import LoadedManifest
from runner.manifest.evaluation import SEED_VARIABLE
from runner.settings import LoggerSettings, Settings
from runner.targets.base import RunControl
from runner.telemetry.logger import Logger
from runner.telemetry.point import MetricPoint
from runner.training.pipeline import RunResult
from runner.training.retry import run_with_retry
from runner.training.signals import on_stop_signals

VARIABLE = SEED_VARIABLE
CONSOLE = "tftrain.log"  # a seed's own console, in its run directory
CONSOLES = "seeds"  # in the home: a seed's console until its run directory takes it
TICK_SECONDS = 0.5


def seed_manifest(loaded: LoadedManifest, seed: int) -> LoadedManifest:
    """The manifest one seed runs: TFTRAIN_SEED set, no model registered by the run itself."""
    manifest = loaded.manifest
    update = {
        "environment_variables": {**manifest.environment_variables, VARIABLE: str(seed)},
        "model": manifest.model.model_copy(update={"register_model": False}),
    }
    return loaded._replace(manifest=manifest.model_copy(update=update))


class SeedWatch:
    """Follows one seed's runs (every attempt): marks each as the seed's, stops it on request."""

    def __init__(self, seed: int, recorded: threading.Event | None = None) -> None:
        """`recorded`: set once the seed's first run is recorded."""
        self.seed, self.recorded = seed, recorded
        self.run_id: str | None = None
        self.control: RunControl | None = None
        self.lock = threading.Lock()
        self.stopping: tuple[str, object] | None = None

    def started(self, run_id: str, control: RunControl, store: Store) -> None:
        store.update_run(run_id, seed={"seed": self.seed})
        with self.lock:
            self.run_id, self.control = run_id, control
            stopping = self.stopping
        if stopping is not None:  # stopped before this attempt was recorded
            self._stop(*stopping)
        if self.recorded is not None:
            self.recorded.set()

    def points(self, points: list[MetricPoint]) -> None:
        pass

    def stop(self, reason: str, sig=None) -> None:
        with self.lock:
            self.stopping = (reason, sig)
            control = self.control
        if control is not None:
            self._stop(reason, sig)

    def _stop(self, reason: str, sig) -> None:
        control = self.control
        if control.cancel.is_set():
            control.force.set()  # a second signal: at once
            return
        control.reason, control.stop_signal = reason, sig
        control.cancel.set()


@dataclass
class SeedOutcome:
    seed: int
    result: RunResult | None = None
    error: FatalError | None = None  # refused before it ran
    log: Path | None = None  # its console, where it was not tftrain's

    @property
    def run_id(self) -> str | None:
        return self.result.run_id if self.result is not None else None

    @property
    def completed(self) -> bool:
        return self.result is not None and self.result.status == RunStatus.COMPLETED


class SeedRunner:
    """Runs seeds 0 … N−1, `concurrent` at a time (`shares`: each worker's GPUs, None: tftrain's)."""

    def __init__(
        self, loaded: LoadedManifest, logger: Logger, settings: Settings, home: Path, environ, shares: list[str | None]
    ) -> None:
        self.loaded, self.logger, self.settings, self.home, self.environ = loaded, logger, settings, home, environ
        self.shares = shares
        self.pending: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.watches: dict[int, SeedWatch] = {}
        self.outcomes: dict[int, SeedOutcome] = {}
        self.stopped = threading.Event()
        self.first = threading.Event()  # seed 0's run is recorded (or will not be): the others may start
        self.lock = threading.Lock()

    def run(self, seeds: int) -> list[SeedOutcome]:
        for seed in range(seeds):
            self.pending.put(seed)
        workers = [
            threading.Thread(target=self._worker, args=(share,), name=f"seeds-{n}", daemon=True)
            for n, share in enumerate(self.shares)
        ]
        with on_stop_signals(self._signal):
            workers[0].start()  # seed 0 first: the run is the first of the seeds' run ids
            while not self.first.wait(TICK_SECONDS) and workers[0].is_alive():
                pass
            for worker in workers[1:]:
                worker.start()
            while any(worker.is_alive() for worker in workers):
                for worker in workers:
                    worker.join(TICK_SECONDS / len(workers))
        return [self.outcomes.get(seed, SeedOutcome(seed)) for seed in range(seeds)]

    def _signal(self, sig) -> None:
        again = self.stopped.is_set()
        self.stopped.set()
        self.logger.warning(
            f"{sig.name}: "
            + ("killing the seeds' training now" if again else "stopping every seed (again to kill at once)")
        )
        with self.lock:
            watches = list(self.watches.values())
        for watch in watches:
            watch.stop(f"{sig.name} to tftrain", sig)

    def _worker(self, gpus: str | None) -> None:
        settings = self.settings if gpus is None else dataclasses.replace(self.settings, cuda_visible_devices=gpus)
        while not self.stopped.is_set():
            try:
                seed = self.pending.get_nowait()
            except queue.Empty:
                return
            watch = SeedWatch(seed, self.first if seed == 0 else None)
            with self.lock:
                self.watches[seed] = watch
            try:
                self.outcomes[seed] = self._one(seed, watch, settings)
            except Exception as exc:  # a defect of tftrain's in one seed: it says so, the others go on
                self.outcomes[seed] = self._broken(seed, exc)
            finally:
                if seed == 0:
                    self.first.set()
            with self.lock:
                self.watches.pop(seed, None)

    def _broken(self, seed: int, exc: Exception) -> SeedOutcome:
        """One line on the console; the traceback in the home's seeds/ folder, for a bug report."""
        import traceback

        trace = self.home / CONSOLES / f"{os.getpid()}-{seed}.error.txt"
        try:
            trace.parent.mkdir(parents=True, exist_ok=True)
            trace.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
            kept = f"trace: {trace}"
        except OSError as why:  # the disk that broke the seed may be full
            kept = f"its trace not kept: {why}"
        said = f"{type(exc).__name__}: {exc}"
        error = FatalError(f"seed {seed} stopped on an error of tftrain's: {said} ({kept})")
        self.logger.error(str(error))
        return SeedOutcome(seed, error=error)

    def _one(self, seed: int, watch: SeedWatch, settings: Settings) -> SeedOutcome:
        loaded = seed_manifest(self.loaded, seed)
        if seed == 0:  # the run: its console is tftrain's
            try:
                return SeedOutcome(seed, run_with_retry(loaded, self.logger, settings, self.home, watch))
            except FatalError as exc:
                return SeedOutcome(seed, error=exc)
        log = self.home / CONSOLES / f"{os.getpid()}-{seed}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.logger.info(f"seed {seed}: training (its console: {CONSOLE} in its run directory)")
        with log.open("w", encoding="utf-8") as stream:
            logger = Logger(stream, settings=LoggerSettings())
            logger.mask_secrets(self.loaded.manifest.secrets, self.environ)
            try:
                result = run_with_retry(loaded, logger, settings, self.home, watch)
                outcome = SeedOutcome(seed, result)
            except FatalError as exc:
                logger.error(str(exc))
                outcome = SeedOutcome(seed, error=exc)
            finally:
                logger.flush()
        outcome.log = _keep_console(log, self.home, watch.run_id)
        ended = outcome.result.status.value if outcome.result else f"refused: {outcome.error}"
        self.logger.info(f"seed {seed}: run {watch.run_id or '(none)'} {ended}")
        return outcome


def _keep_console(log: Path, home: Path, run_id: str | None) -> Path:
    """The seed's console moved into its run directory (nothing lost; no stray file in runs/)."""
    if run_id is None:
        return log
    try:
        with Store(home) as store:
            target = Path(store.run(run_id).run_dir) / CONSOLE
        log.replace(target)
    except (OSError, FatalError):
        return log
    try:
        log.parent.rmdir()  # the last seed's console moved: no empty folder left in the home
    except OSError:
        pass
    return target
