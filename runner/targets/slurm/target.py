"""The slurm target: the plan as one batch job on the users' own Slurm cluster, submitted with
sbatch from a login node (or a self-hosted runner on one).

check: sbatch on PATH, `sbatch --test-only` with what the job asks for (one line for an unknown
partition, a request the cluster can never satisfy, a controller that does not answer), before the
run is recorded. environment: the local target's cached virtualenv (runner.environments, built
once under a lock), on a filesystem every node sees. finalize: the batch script
(templates/slurm_batch.sh.j2) and tasks.json, kept in the run's launch directory. execute: sbatch,
then the run Queued while Slurm keeps the job PENDING (with its reason; compute.queue_timeout_seconds), each
task's log followed from the shared filesystem, the job watched and stopped
(runner.targets.slurm.watch). Containers: none (Apptainer and enroot are not in Debian 12).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from runner.environments import env_spec
from runner.errors import FatalError, ManifestError, UnsupportedError, Vanished
from runner.history.rundir import RunPaths, RuntimePaths
from runner.history.usage import Allocation
from runner.manifest import LoadedManifest
from runner.paths import cache_dir, tftrain_home
from runner.plan.model import ContainerSpec, LaunchPlan
from runner.settings import Settings
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, TargetState
from runner.targets.interpreter import (
    InterpreterState,
    interpreter_environment,
    interpreter_probing,
    task_environment,
    user_managed_state,
)
from runner.targets.slurm import jobs
from runner.targets.slurm.accounting import allocation_of, said
from runner.targets.slurm.array_jobs import ArrayEntry, array_task_queued, sbatch_options
from runner.targets.slurm.crosscheck import RunView, checked, cross_check
from runner.targets.slurm.gpus import gpus_allocated
from runner.targets.slurm.script import (
    BatchRequest,
    Launch,
    LaunchMode,
    batch_request,
    batch_script,
    launch_for,
    shared_env,
    slurm_components,
    task_log,
    tasks_document,
)
from runner.targets.slurm.tail import FileTail
from runner.targets.slurm.watch import JobWatch, ending_of
from runner.targets.supervise import STOP_REST_SECONDS, by_policy, supervise
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump

SCRIPT = "slurm.sh"
TASKS = "tasks.json"
ARRAY_TASK = "array-task"  # a sweep's trial: its task of the sweep's array job (A_i), for reap_lost
POLL_SECONDS = 0.2
NO_CONTAINERS = (
    "the slurm target runs the training in a virtualenv on the cluster's shared filesystem; it has no container "
    "path (Apptainer and enroot, which run images under Slurm, are not in Debian 12): drop it, or use the docker, "
    "pool or kubernetes target"
)


@dataclass(frozen=True, slots=True)
class SlurmState(TargetState):
    local: InterpreterState  # the environment on the shared filesystem (runner.targets.interpreter)
    request: BatchRequest
    pmix: bool  # MPI ranks start through srun --mpi=pmix (else mpirun in the allocation)
    queue_timeout: int  # compute.queue_timeout_seconds: how long the job may stay PENDING


def home_comment(home: Path) -> str:
    """The jobs' --comment: which TFTRAIN_HOME submitted them (a run id repeats across homes)."""
    return "tftrain:" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


def _check_shared(loaded: LoadedManifest) -> None:
    shared = loaded.manifest.compute.slurm.shared_dir
    if shared is None:
        return
    root = Path(shared).resolve()
    for what, path in (("TFTRAIN_HOME", tftrain_home()), ("the environment cache (TFTRAIN_CACHE_DIR)", cache_dir())):
        if not path.resolve().is_relative_to(root):
            raise ManifestError(
                f"{loaded.path}: compute.slurm.shared_dir: {what} is {path}, outside {shared}: the nodes would not see"
                f" it; set it to a directory under {shared}"
            )


def _pmix_wanted(loaded: LoadedManifest) -> bool:
    training = loaded.manifest.distributed_training
    if training is None or training.backend != "mpi":
        return False
    chosen = loaded.manifest.compute.slurm.mpi
    if chosen != "auto":
        return chosen == "pmix"
    return bool(jobs.has_pmix())


class SlurmTarget(Target):
    name = "slurm"

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings)
        self.paths: RunPaths | None = None
        self.state: SlurmState | None = None
        self.launch: Launch | None = None
        self.request: BatchRequest | None = None
        self.components: list[list[int]] | None = None  # a heterogeneous job's ranks per component

    def sweep_batcher(self, loaded: LoadedManifest, root: Path, sweep_id: str, concurrent: int):
        if not loaded.manifest.compute.slurm.array:
            return None
        from runner.targets.slurm.array_jobs import sweep_batcher

        return sweep_batcher(root / "slurm", sweep_id, concurrent)

    def reap_lost(self, run_id: str, home: Path) -> str | None:
        """scancel the run's jobs still in Slurm's queue: its name and this home's comment (never another's),
        or, a sweep's trial, its array task (launch/array-task) where it holds this home's comment."""
        try:
            found = jobs.jobs_named(f"tftrain-{run_id}", home_comment(home))
            found += array_task_queued(home / "runs" / run_id / "launch" / ARRAY_TASK, home_comment(home))
            for job_id in found:
                jobs.cancel(job_id)
        except FatalError:  # slurmctld not answering: the next command tries again
            return None
        return f"canceled Slurm job {', '.join(found)}" if found else None

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> SlurmState:
        manifest = loaded.manifest
        if manifest.custom_docker_image:
            raise UnsupportedError(f"custom_docker_image: {NO_CONTAINERS}")
        _check_shared(loaded)
        request = batch_request(manifest, "RUN_ID", home_comment(tftrain_home()), manifest.grace_seconds)
        if not dry_run:
            jobs.test_only(request.options(), str(loaded.path))
        if manifest.user_managed:
            local = user_managed_state(loaded, dry_run)
        else:
            local = InterpreterState(
                env_spec(manifest, loaded.source_dir, own_interpreter=False)
            )  # the nodes may lack tftrain's
        self.state = SlurmState(local, request, _pmix_wanted(loaded), manifest.compute.queue_timeout_seconds)
        return self.state

    def environment(
        self, loaded: LoadedManifest, state: SlurmState, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        env = interpreter_environment(loaded, state.local, paths, logger, dry_run)
        return replace(env, description=env.description + " (on the shared filesystem)")

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec | None]:
        self.paths = paths  # finalize writes the job's files into its launch directory
        return paths.runtime(inputs, resume), None

    def finalize(self, plan: LaunchPlan, loaded: LoadedManifest, run_id: str) -> LaunchPlan:
        assert self.paths is not None and self.state is not None
        job_dir = str(self.paths.launch_dir)
        if any(char.isspace() or char == "%" for char in job_dir + plan.tasks[0].cwd):
            raise UnsupportedError(
                f"compute.target: slurm: the run directory {job_dir!r} holds a space or %, which #SBATCH lines and "
                "Slurm's file name patterns cannot carry; set TFTRAIN_HOME to a path without them"
            )
        request = replace(self.state.request, job_name=f"tftrain-{run_id}")
        launch = launch_for(plan, loaded.manifest, job_dir, plan.tasks[0].argv[0], self.state.pmix)
        self.components = slurm_components(loaded.manifest)
        files = {
            SCRIPT: batch_script(request, launch, job_dir, plan.tasks[0].cwd, run_id),
            TASKS: tasks_document(plan, job_dir, self.components),
        }
        self.launch, self.request = launch, request
        return replace(plan, files={**plan.files, **files})

    def stops_to_resume(self, loaded: LoadedManifest) -> bool:
        """Every job may meet its time limit or a preemption, and a requeue or a retry resumes it."""
        return True

    def allocated_gpus(self, state: SlurmState) -> int:
        return gpus_allocated(state.request)

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        with interpreter_probing(env, paths, warm, self.settings) as probe:
            yield probe

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        assert self.paths is not None
        job_dir = self.paths.launch_dir
        by_driver = self.launch.mode == LaunchMode.MPIRUN
        job_dir.chmod(0o700)  # the raw logs below hold what the masked ones in logs/ do not
        tails = _follow(plan, pump, sinks, job_dir, by_driver, self.components)
        watch, outcome = None, None
        try:
            job_id = self._submit(plan, job_dir, logger)
            watch = JobWatch(job_id, job_dir, plan, by_driver, logger, requeue=self.request.requeue)
            try:
                outcome = self._supervise(watch, plan, control)
            except BaseException:  # tftrain's own failure: the job must not train on unsupervised
                watch.stop(0.0, control.force)
                raise
        finally:
            seen = watch.allocated_seconds() if watch is not None else None
            started = watch is not None and watch.ran()  # before its batch.log goes, below
            control.allocated_seconds = seen or 0.0
            for tail in tails:
                tail.finish()
            pump.join()
            for tail in tails:  # unmasked: the run keeps the masked copies (logs/<rank>.log)
                tail.path.unlink(missing_ok=True)
            if watch is not None:  # last: a wait for Slurm's accounting (or a Ctrl-C in it) holds none of the above
                seconds, allocation = allocation_of(
                    watch.job_id,
                    watch.info,
                    seen,
                    logger.warning,
                    len(self.request.parts()) if self.request else 1,
                    started,
                )
                if outcome is not None:  # decided: Slurm's record is set against it
                    outcome, allocation = self._cross_check(watch, outcome, allocation, seen, logger)
                control.allocation, control.allocated_seconds = allocation, seconds or 0.0
                logger.info(said(allocation))
        return outcome

    def _cross_check(
        self, watch: JobWatch, outcome: Outcome, allocation: Allocation, seen: float | None, logger: Logger
    ) -> tuple[Outcome, Allocation]:
        """sacct's record against what tftrain saw (runner.targets.slurm.crosscheck): each disagreement
        warned once and kept in the allocation; a failure Slurm explains better says so."""
        view = RunView(
            outcome,
            tasks_failed=any(code not in (None, 0) for _, code in watch.codes()),
            stopped=watch.canceled,
            requeued=watch.requeues.told > 0,
            gpus_asked=gpus_allocated(self.state.request),
            seen_seconds=seen,
            slurm_said=watch.info.state if watch.info is not None else None,
        )
        outcome, findings = cross_check(watch.job_id, view, allocation)
        for found in findings:
            logger.warning(found.warning)
        return outcome, checked(allocation, findings)

    def _submit(self, plan: LaunchPlan, job_dir: Path, logger: Logger) -> str:
        """sbatch of the run's script; a sweep's trial (Settings.slurm_array) hands it to the sweep's
        array job instead, where it can (runner.targets.slurm.array_jobs)."""
        env = task_environment(shared_env(plan))  # PYTHONPATH joined, as local
        ticket = self.settings.slurm_array if self.settings is not None else None
        if ticket is not None:
            script = job_dir / SCRIPT
            entry = ArrayEntry(
                script,
                job_dir,
                plan.tasks[0].cwd,
                sbatch_options(script.read_text()),
                env,
                frozenset(plan.secret_names),
                self.request.comment,
                logger.warning,
            )
            task = ticket.submit(entry)
            if task is not None:
                (job_dir / ARRAY_TASK).write_text(task + "\n")
                logger.info(f"slurm job {task} submitted, a task of the sweep's array job: {script}")
                return task
        job_id = jobs.submit(
            job_dir / SCRIPT, env, "compute.slurm", self.request.job_name, self.request.comment, logger.warning
        )
        logger.info(f"slurm job {job_id} submitted: {job_dir / SCRIPT}")
        return job_id

    def _supervise(self, watch: JobWatch, plan: LaunchPlan, control: RunControl) -> Outcome:
        """Queued while PENDING, then the tasks' exit files by the success policy, Slurm's state for
        what they cannot tell."""

        def stop(grace: float) -> None:
            watch.stop(grace, control.force)

        waited = watch.queue(control, self.state.queue_timeout)
        if waited is not None:
            return waited
        control.start_clock()  # max_run_duration_seconds counts from Running, not from the submission
        decided = by_policy(watch.codes, stop, plan.success_policy, control)

        def judge() -> Outcome | None:
            outcome = watch.refused(control.force) or decided()
            if outcome is None:
                try:
                    info = watch.state()
                except Vanished:  # Slurm forgot the job: its tasks' exit files may still say how it ended
                    outcome = decided()
                    if outcome is None:
                        raise
                    info = None
                if info is not None and watch.requeues.over(info):
                    outcome = watch.refused(control.force) or decided() or ending_of(info, watch.job_id)
            if outcome is not None:
                watch.decided()
            return outcome

        outcome = supervise(
            judge, stop, control, every=POLL_SECONDS, stopped=f"; Slurm job {watch.job_id} was canceled"
        )
        if not outcome.taken:
            info = watch.final_state()
            if info is not None and not info.state.ended:  # decided by its tasks: what is left (parameter servers) goes
                stop(min(control.grace_seconds, STOP_REST_SECONDS))
        return outcome


def _follow(
    plan: LaunchPlan,
    pump: LogPump,
    sinks: dict[int, LineSink],
    job_dir: Path,
    by_driver: bool,
    components: list[list[int]] | None = None,
) -> list[FileTail]:
    """Every task's log (srun writes rank-N.log; a heterogeneous job's per component, script.task_log),
    or mpirun's tagged output in batch.log."""
    tails = []
    if by_driver:
        tail = FileTail(job_dir / "batch.log")
        pump.add_tagged(tail.read_fd, {task.rank: sinks.get(task.rank) for task in plan.tasks}, "mpirun")
        return [tail]
    for task in plan.tasks:
        tail = FileTail(job_dir / task_log(task.rank, components))
        pump.add(task.rank, tail.read_fd, sinks.get(task.rank), task.label)
        tails.append(tail)
    batch = FileTail(job_dir / "batch.log")
    pump.add("slurm", batch.read_fd, None, "slurm")
    return [*tails, batch]
