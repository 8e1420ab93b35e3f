"""A job that outlives one allocation (compute.slurm.time_limit): Slurm requeues the same job at its
time limit (the batch script's `scontrol requeue`) or at preemption (PreemptMode=REQUEUE), and it
starts again, SLURM_RESTART_COUNT one higher, resuming from its backup. What the watcher needs of
that: each restart told once with its cause (the batch script's marker JOB_DIR/requeue/RESTART), a
requeue Slurm refused (JOB_DIR/requeue/RESTART.refused), and a PREEMPTED or NODE_FAIL state that is
only the way back to PENDING."""

from __future__ import annotations

import time
from pathlib import Path

from runner.manifest.document import one_line
from runner.targets.slurm.jobs import JobInfo, JobState
from runner.telemetry.logger import Logger

REQUEUE_DIR = "requeue"
CAUSES = ("time limit", "preemption")  # what the batch script writes
UNKNOWN_CAUSE = "by Slurm: preemption, a node failure or scontrol requeue"
SETTLE_SECONDS = 60.0  # a requeued job leaves PREEMPTED / NODE_FAIL for PENDING well within this
MARKER_BYTES = 512  # of a marker: the job's own files, read as hostile text


def read_marker(path: Path) -> str | None:
    """A marker's first line, printable; None while it is missing."""
    try:
        with path.open("rb") as handle:
            head = handle.read(MARKER_BYTES)
    except OSError:
        return None
    first = head.decode("utf-8", errors="replace").strip().splitlines()[:1]
    return one_line(first[0].strip() if first else "")[:300]


class Requeues:
    def __init__(self, job_id: str, job_dir: Path, logger: Logger, enabled: bool) -> None:
        self.job_id, self.dir, self.logger, self.enabled = job_id, job_dir / REQUEUE_DIR, logger, enabled
        self.told = 0  # restarts told so far
        self.ended_since: float | None = None  # when a requeue-or-end state was first seen
        # Slurm's StartTime/EndTime are the last start's: the allocation's time over every start is tftrain's count
        self.ran = 0.0
        self.running_since: float | None = None

    def cause(self, restart: int) -> str:
        """Why start `restart` of the job ended in a requeue."""
        said = read_marker(self.dir / str(restart))
        return said if said in CAUSES else UNKNOWN_CAUSE

    def seen(self, info: JobInfo, now: float) -> None:
        """Tell each restart Slurm reports, once, in order; count the time the job holds its allocation."""
        holding = info.state in (JobState.RUNNING, JobState.COMPLETING)
        if holding and self.running_since is None:
            self.running_since = now
        elif not holding and self.running_since is not None:
            self.ran += now - self.running_since
            self.running_since = None
        while self.told < info.restarts:
            self.told += 1
            self.logger.warning(f"slurm job {self.job_id} requeued ({self.cause(self.told - 1)}) — restart {self.told}")

    def held(self, until: float) -> float:
        """Seconds the job held its allocation, over all its starts (as tftrain saw them), until `until`."""
        return self.ran + (max(0.0, until - self.running_since) if self.running_since is not None else 0.0)

    def over(self, info: JobInfo) -> bool:
        """Whether the job ended for good: a requeued job passes through PREEMPTED or NODE_FAIL on
        its way back to PENDING; it has ended only once it stays there SETTLE_SECONDS."""
        if not info.state.ended:
            self.ended_since = None
            return False
        if not self.enabled or info.state not in (JobState.PREEMPTED, JobState.NODE_FAIL):
            return True
        now = time.monotonic()
        if self.ended_since is None:
            self.ended_since = now
        return now - self.ended_since > SETTLE_SECONDS

    def refused(self) -> str | None:
        """What `scontrol requeue` answered when Slurm refused to requeue the job; None: it never did."""
        if not self.enabled or not self.dir.is_dir():
            return None
        for path in sorted(self.dir.glob("*.refused")):
            said = read_marker(path)
            if said is not None:
                return said or "no reason given"
        return None
