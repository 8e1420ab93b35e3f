"""Watching a submitted job until it is decided: the tasks' exit files (rank.py writes them) judged
by the plan's success policy, the job's state from the scheduler for what the files cannot say
(pending, a time limit, a cancel or node failure from outside), and the stop: scancel with a
signal, the grace, then scancel for good, until Slurm no longer runs the job."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.errors import ClusterError, PlacementError, Vanished
from runner.history.states import RunStatus
from runner.manifest.document import one_line
from runner.plan.model import LaunchPlan, TaskSpec
from runner.targets.base import Outcome, RunControl
from runner.targets.slurm import jobs
from runner.targets.slurm.asking import Asker, scheduler_failure
from runner.targets.slurm.jobs import JobInfo, JobState
from runner.targets.slurm.requeue import Requeues
from runner.targets.supervise import canceled
from runner.telemetry.logger import Logger

STATE_EVERY = 0.5  # seconds between two questions to slurmctld
SILENT_SECONDS = 60.0  # slurmctld not answering this long: the job is lost to tftrain
ASK_SECONDS = jobs.COMMAND_SECONDS + 5.0  # the longest wait for a fresh answer
GONE_WAIT_SECONDS = 30.0  # after the kill, how long to wait for Slurm to end the job
# every task has exited: what is left (srun's teardown, the batch script's last line, the epilog) is
# let end by itself this long before a scancel, which would make Slurm's record of a job that
# completed say CANCELLED (seen under load: sacct's State for a finished training)
ENDING_SECONDS = 30.0
REASON_CHARS = 200  # of Slurm's pending reason, kept in the run's record
UNSEEN_SECONDS = 60.0  # a PENDING job without a reason is not yet looked at: Slurm's default sched_interval to do so


def read_exit(path: Path) -> int | None:
    """An exit file's status; None while it is missing (or, written by hand, not a number: its first
    32 bytes only, never decoded as text, so neither a huge file nor stray bytes can hurt)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(32)
    except OSError:
        return None
    try:
        return int(head.strip())
    except ValueError:
        return None


def ending_of(info: JobInfo, job_id: str) -> Outcome:
    """The outcome of a job that ended without its tasks deciding it (their exit files)."""
    state = info.state
    if state in (JobState.TIMEOUT, JobState.DEADLINE):
        return Outcome(RunStatus.TIMED_OUT, None, f"Slurm ended job {job_id} at its time limit ({state.value})")
    if state.taken:
        return Outcome(
            RunStatus.FAILED,
            None,
            f"Slurm job {job_id} ended {state.value} outside tftrain (scancel, a node failure or preemption)",
            taken=True,
        )
    if state == JobState.OUT_OF_MEMORY:
        return Outcome(RunStatus.FAILED, None, f"Slurm job {job_id} ran out of memory")
    code = info.exit_code if info.exit_code else None
    detail = f" (exit code {code})" if code is not None else f" (signal {info.signal})" if info.signal else ""
    return Outcome(
        RunStatus.FAILED,
        code,
        f"Slurm job {job_id} ended {state.value}{detail} before every task reported its exit status",
    )


# the states Slurm ends a job in without starting it: a scancel while it is PENDING, its --deadline passed
NEVER_STARTED = frozenset({JobState.CANCELLED, JobState.DEADLINE})


def unstarted_ending(info: JobInfo, job_id: str, reason: str) -> PlacementError:
    """A job Slurm ended while it was PENDING (`reason`: why it waited, as last said): its batch
    script never ran, as a job past its queue timeout."""
    if info.state == JobState.CANCELLED:
        return PlacementError(
            f"Slurm job {job_id} was canceled while PENDING ({reason}), before it started (scancel from outside"
            " tftrain)"
        )
    return PlacementError(f"Slurm job {job_id} ended {info.state.value} while PENDING ({reason}), before it started")


def vanished_unstarted(job_id: str, reason: str | None) -> PlacementError:
    """A job that Slurm (scontrol, sacct, the jobcomp file) no longer lists, or never listed, before
    it started (an array task scanceled while PENDING beside others leaves no trace): nothing of it runs."""
    listed = (
        f"no longer lists job {job_id} (last seen PENDING ({reason}))"
        if reason is not None
        else f"does not list job {job_id}"
    )
    return PlacementError(f"Slurm {listed}: it never started (a scancel while it was pending, or Slurm forgot it)")


def pending_reason(info: JobInfo | None) -> str:
    """Why Slurm keeps a job PENDING, as one printable line of at most REASON_CHARS (the record's,
    the console's): scontrol's Reason is the cluster's text."""
    reason = one_line(info.reason)[:REASON_CHARS] if info is not None else ""
    return reason or "no reason given"


class ControllerSilent(Vanished):
    """slurmctld has not answered about the job for SILENT_SECONDS: the run cannot be judged, but
    unlike a job Slurm forgot, the job may still run."""


class JobWatch:
    def __init__(
        self,
        job_id: str,
        job_dir: Path,
        plan: LaunchPlan,
        by_driver: bool,
        logger: Logger,
        jobcomp: Callable[[], Path | None] | None = None,
        requeue: bool = False,
    ) -> None:
        self.job_id, self.job_dir, self.plan, self.logger = job_id, job_dir, plan, logger
        self.by_driver = by_driver  # mpirun: its exit status is the job's
        self.requeues = Requeues(job_id, job_dir, logger, requeue)  # compute.slurm.time_limit
        where = functools.cache(jobcomp or jobs.jobcomp_file)  # asked once, and only for a job slurmctld forgot
        self.asker = Asker(lambda: jobs.job_info(job_id, where))
        self.info: JobInfo | None = None
        self.read = 0  # the number of the last answer read
        self.asked = 0.0
        self.answered = time.monotonic()
        self.warned = False
        self.failing = False  # the last answer read was the scheduler's failure
        self.told: tuple[JobState, str] | None = None
        self.started_at: float | None = None  # when tftrain first saw the job run (time.monotonic())
        self.ended_at: float | None = None  # … and end: Slurm's state, or its tasks' verdict
        self.canceled = False  # tftrain scancel'd the job: Slurm's final state is that stop's, not the tasks'

    def codes(self) -> list[tuple[TaskSpec, int | None]]:
        """(task, exit status or None) for what tftrain judges: the driver (mpirun) or each task."""
        if self.by_driver:
            return [(self.plan.driver, read_exit(self.job_dir / "exit" / "driver"))]
        return [(task, read_exit(self.job_dir / "exit" / str(task.rank))) for task in self.plan.tasks]

    def started(self) -> bool:
        """Whether the job has left PENDING: Slurm says so, or the job's batch.log exists (Slurm
        creates it as the batch script starts), which needs no answer from slurmctld."""
        if self.started_at is None and (self.job_dir / "batch.log").exists():
            self.started_at = time.monotonic()
        return self.started_at is not None

    def ran(self) -> bool:
        """Whether the batch script started: its batch.log exists (Slurm's JobState alone cannot say,
        for a job that ran between two questions)."""
        return (self.job_dir / "batch.log").exists()

    def decided(self) -> None:
        """The tasks' exit files decided the run: the job's time ends here, as far as tftrain saw."""
        self.started()
        if self.ended_at is None:
            self.ended_at = time.monotonic()

    def allocated_seconds(self) -> float | None:
        """How long the job held its allocation: Slurm's EndTime − StartTime where it told them, else
        what tftrain saw (batch.log or RUNNING, to the tasks' verdict or the job's end); None: it never ran."""
        if self.requeues.told:  # Slurm's times are the last start's
            return self.requeues.held(self.ended_at or time.monotonic())
        if self.info is not None and self.info.elapsed is not None:
            return self.info.elapsed
        if self.started_at is None:
            return None
        return (self.ended_at or time.monotonic()) - self.started_at

    def state(self, fresh: bool = False) -> JobInfo | None:
        """The job's state as slurmctld last told it, asked at most every STATE_EVERY seconds in a
        thread of its own (a hung scontrol never holds the run); `fresh`: an answer to a question
        asked now, waited for up to ASK_SECONDS. The console hears each change, and once that
        slurmctld does not answer; ControllerSilent after SILENT_SECONDS of that."""
        now = time.monotonic()
        if fresh:
            answer = self.asker.wait(self.asker.send(), ASK_SECONDS)
        else:
            if now - self.asked >= STATE_EVERY:
                self.asked = now
                self.asker.send()
            answer = self.asker.newer(self.read)
        if answer is None or (failure := scheduler_failure(answer)) is not None:
            if answer is not None:
                self.read = answer.number
            elif fresh or self.asker.out_for() > ASK_SECONDS:
                failure = jobs.Silent(f"scontrol did not answer in {ASK_SECONDS:g} s")
            else:  # the question out is not yet answered: no silence
                failure = None
            return self._silence(failure)
        self.read = answer.number
        self.answered = time.monotonic()
        self.failing = False
        if answer.info is None:
            raise Vanished(f"Slurm no longer knows job {self.job_id}")
        self._seen(answer.info)
        return answer.info

    def _silence(self, failure: Exception | None) -> JobInfo | None:
        self.failing = self.failing or failure is not None
        if failure is not None and not self.warned:
            self.warned = True
            self.logger.warning(
                f"slurm job {self.job_id}: {failure}; tftrain keeps asking, and judges the job by its tasks' exit files"
                " meanwhile"
            )
        if time.monotonic() - self.answered > SILENT_SECONDS:
            raise ControllerSilent(
                f"slurmctld stopped answering about job {self.job_id}" + (f": {failure}" if failure else "")
            )
        return self.info

    def _seen(self, info: JobInfo) -> None:
        self.info = info
        self.requeues.seen(info, time.monotonic())
        if info.state != JobState.PENDING and self.started_at is None:
            self.started_at = time.monotonic()
        if info.state.ended and self.ended_at is None:
            self.ended_at = time.monotonic()
        self._tell(info)

    def refused(self, force: threading.Event) -> Outcome | None:
        """A requeue Slurm refused (the batch script's `scontrol requeue` failed): the job is canceled
        and the run fails, saying so; None while none was."""
        said = self.requeues.refused()
        if said is None:
            return None
        self.logger.error(f"slurm job {self.job_id}: Slurm refused to requeue it at its time limit: {said}")
        self.stop(0.0, force)
        return Outcome(
            RunStatus.FAILED,
            None,
            f"Slurm refused to requeue job {self.job_id} at its time limit (scontrol requeue: {said}); the job was"
            " canceled",
        )

    def _tell(self, info: JobInfo) -> None:
        said = (info.state, info.reason if info.state == JobState.PENDING else "")
        if said == self.told:
            return
        self.told = said
        if info.state == JobState.PENDING:
            self.logger.info(f"slurm job {self.job_id}: Queued (PENDING: {pending_reason(info)})")
        elif info.state == JobState.RUNNING:
            self.logger.info(f"slurm job {self.job_id}: RUNNING")

    def queue(self, control: RunControl, timeout: int) -> Outcome | None:
        """While Slurm keeps the job PENDING the run is Queued, with Slurm's reason (control.queued);
        None once the job left PENDING (it runs, or it ended: the watch judges it next). Ended by
        Slurm before it started (a scancel from outside, its deadline): PlacementError, with Slurm's
        last reason, or forgotten by Slurm (or never listed) before it started: PlacementError. Canceled
        while pending: scancel, Canceled. Still pending after `timeout` seconds
        (compute.queue_timeout_seconds, as the pool's queue; a job Slurm has not yet looked at, with
        no reason, is given UNSEEN_SECONDS more: every job is PENDING a moment): scancel, PlacementError."""
        since, told, last = time.monotonic(), None, None
        while True:
            try:
                info = self.state()
            except ControllerSilent:
                return None  # not the job's end: the watch judges it by its tasks' exit files meanwhile
            except Vanished:
                if self.ran():
                    return None  # the watch meets it again: its tasks' exit files may say how it ended
                raise vanished_unstarted(self.job_id, pending_reason(last) if last is not None else None) from None
            if info is not None and info.state in NEVER_STARTED and not self.ran():
                said = info.reason or (last.reason if last is not None else "")
                raise unstarted_ending(info, self.job_id, pending_reason(JobInfo(info.state, said)))
            if (info is not None and info.state != JobState.PENDING) or self.started():
                return None
            last = info or last
            if info is not None and info.reason != told and control.queued is not None:
                told = info.reason
                control.queued(f"Slurm job {self.job_id}: PENDING ({pending_reason(info)})")
            if control.cancel.is_set():
                self.stop(0.0, control.force)
                return canceled(control, f" while queued; Slurm job {self.job_id} was canceled")
            waited = time.monotonic() - since
            if waited > timeout and ((info is not None and info.reason) or waited > timeout + UNSEEN_SECONDS):
                self.stop(0.0, control.force)
                raise PlacementError(
                    f"compute.queue_timeout_seconds ({timeout}s) passed and Slurm job {self.job_id} is still PENDING "
                    f"({pending_reason(info)}); it was canceled"
                )
            control.cancel.wait(STATE_EVERY)

    def stop(self, grace: float, force: threading.Event) -> None:
        """SIGTERM to the batch shell and every task, up to `grace` seconds, then scancel; returns
        once Slurm has ended the job (or GONE_WAIT_SECONDS later)."""
        try:
            self._stop(grace, force)
        except ControllerSilent as silent:  # not the job's end: it may well run on
            self._cancel_unseen(silent)
        except Vanished:
            pass  # Slurm forgot the job: nothing of it runs
        except ClusterError as silent:  # scancel did not answer
            self.logger.warning(
                f"slurm job {self.job_id}: {silent}; it may still be running: scancel {self.job_id} once slurmctld"
                " answers"
            )

    def final_state(self) -> JobInfo | None:
        """The job's state once its tasks decided the run, asked afresh while slurmctld answers; None
        while it does not (a hung controller holds no verdict: a job whose tasks all reported ends by
        itself, and the success policy has stopped the rest), or once Slurm forgot the job."""
        if self.asker.out_for() > STATE_EVERY * 4 or self.failing:
            return None
        try:
            return self.state(fresh=True)
        except Vanished:  # ControllerSilent too
            return None

    def _ending(self, force: threading.Event) -> JobInfo | None:
        """The job's state once it has ended by itself, or ENDING_SECONDS later (every task has exited)."""
        deadline = time.monotonic() + ENDING_SECONDS
        info = self.state(fresh=True)
        while info is not None and not info.state.ended and time.monotonic() < deadline:
            if force.wait(STATE_EVERY):
                break
            info = self.state(fresh=True)
        return info

    def _cancel_unseen(self, silent: ControllerSilent) -> None:
        """scancel, once, for a job slurmctld says nothing about; the console says what is known."""
        self.canceled = True
        try:
            jobs.cancel(self.job_id)
        except ClusterError:
            self.logger.warning(
                f"{silent}; job {self.job_id} may still be running: scancel {self.job_id} once slurmctld answers"
            )
            return
        self.logger.warning(f"{silent}; scancel {self.job_id} was sent, but whether the job ended is not known")

    def _stop(self, grace: float, force: threading.Event) -> None:
        info = self.state(fresh=True)
        pending = info is not None and info.state == JobState.PENDING
        exited = info is not None and not pending and all(code is not None for _, code in self.codes())
        if exited:
            info = self._ending(force)
        if info is not None and not info.state.ended:
            self.canceled = True
            if pending or exited:
                grace = 0.0  # nothing runs yet, or no task is left: nothing to let end well
            else:
                jobs.cancel(self.job_id, "TERM")
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and not force.wait(0.2):
                info = self.state(fresh=True)
                if info is None or info.state.ended or all(code is not None for _, code in self.codes()):
                    break
            jobs.cancel(self.job_id)
        deadline = time.monotonic() + GONE_WAIT_SECONDS
        while time.monotonic() < deadline:
            info = self.state(fresh=True)
            if info is None or info.state.ended:
                return
            time.sleep(0.2)
        self.logger.warning(
            f"slurm job {self.job_id} is still {info.state.value} {GONE_WAIT_SECONDS:g} s after scancel"
        )
