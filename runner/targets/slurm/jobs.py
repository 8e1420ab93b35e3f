"""Slurm's commands, as tftrain uses them: sbatch (--test-only first), scontrol for a job's state,
sacct where slurmdbd answers, the jobcomp file after both forgot it, scancel, squeue by name.

Every answer is parsed as hostile text: a state tftrain does not know is none of its own, a line
that does not parse is no job. Every command runs through `run`: a time limit (a controller that
does not answer is ClusterError, one line) and its output decoded with replacement (a cluster's
bytes are not always UTF-8: a job name, a reason, a site's wrapper script).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path

from runner.errors import ClusterError, FatalError, ManifestError, PlacementError, UnsupportedError
from runner.manifest.document import one_line

COMMAND_SECONDS = 30.0
JOB_ID = re.compile(r"^(\d{1,12})(;[^\s]*)?$")
# squeue's %i of an array job: A_i for a task of its own, A_[2-5%2] for those still pending together
ARRAY_ID = re.compile(r"^(\d{1,12})_(\d{1,7}|\[[0-9,%-]{1,200}\])$")


class JobState(str, Enum):
    """Slurm's job states that tftrain tells apart (`scontrol show job`'s JobState, sacct's State)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    DEADLINE = "DEADLINE"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    OTHER = "OTHER"  # any word tftrain does not know: still running, as far as it can tell

    @classmethod
    def parse(cls, word: str) -> JobState:
        word = word.split()[0] if word.split() else ""  # sacct: "CANCELLED by 0"
        try:
            return cls(word.rstrip("+"))
        except ValueError:
            return cls.OTHER

    @property
    def ended(self) -> bool:
        return self in ENDED

    @property
    def taken(self) -> bool:
        """Ended by the cluster, not the script: a retry's `preempted`."""
        return self in (JobState.CANCELLED, JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL)


ENDED = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.DEADLINE,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
    }
)


@dataclass(frozen=True, slots=True)
class JobInfo:
    state: JobState
    reason: str = ""
    exit_code: int | None = None  # the batch script's, from ExitCode=N:S
    signal: int | None = None
    elapsed: float | None = None  # seconds from the job's start to its end, by Slurm's clock (an ended job's)
    restarts: int = 0  # how often Slurm requeued the job (Restarts=, the tasks' SLURM_RESTART_COUNT)


def require(program: str = "sbatch") -> str:
    path = shutil.which(program)
    if path is None:
        raise UnsupportedError(
            f"compute.target: slurm needs {program} on PATH (run tftrain on a login node of the cluster; "
            "Debian/Ubuntu: apt-get install slurm-client)"
        )
    return path


class Silent(ClusterError):
    """A scheduler command that did not answer in COMMAND_SECONDS: what it was asked may have been done."""


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One scheduler command, its output as text whatever its bytes; Silent past COMMAND_SECONDS,
    UnsupportedError when it cannot be started."""
    try:
        result = subprocess.run(
            argv, capture_output=True, timeout=COMMAND_SECONDS, check=False, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise Silent(f"{Path(argv[0]).name} did not answer in {COMMAND_SECONDS:g} s: is slurmctld running?") from None
    except OSError as exc:
        raise UnsupportedError(f"cannot run {Path(argv[0]).name}: {exc.strerror}") from None
    return subprocess.CompletedProcess(argv, result.returncode, _text(result.stdout), _text(result.stderr))


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def refusal(stderr: str) -> str:
    """Slurm's own words: its last `error:` line, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    return (errors or lines or ["no reason given"])[-1][:500]


QOS_LIMIT = re.compile(r"\bQOS(?:Max|Min|Grp)[A-Za-z]{1,60}\b")  # sbatch's reason: QOSMaxGRESPerJob, …
QOS_FIELDS = ("MaxTRES", "MaxTRESPerNode", "MaxWall", "MinTRES")


def judge_refusal(stderr: str, where: str, qos: str | None = None) -> Exception:
    """sbatch's refusal as tftrain's error: the manifest key it is about where Slurm says; a job over
    a limit of its QoS (`qos`: compute.slurm.qos) names the limit, and the QoS's figures where
    sacctmgr tells them."""
    words = refusal(stderr)
    low = stderr.lower()
    limit = QOS_LIMIT.search(stderr)
    if limit is not None:
        named = f" {qos!r}" if qos else ""
        figures = qos_limits(qos) if qos else ""
        return PlacementError(
            f"{where}: compute.slurm.qos: the job is over a limit of its QoS{named} ({limit.group(0)}"
            + (f"; the QoS allows {figures}" if figures else "")
            + "): ask for less, or use another QoS; nothing was submitted"
        )
    if "unable to contact slurm controller" in low or "connection refused" in low or "socket timed out" in low:
        return ClusterError(
            f"slurmctld does not answer ({words}); is the cluster up?"
            f" (SLURM_CONF={os.environ.get('SLURM_CONF', '/etc/slurm/slurm.conf')})"
        )
    for key in ("partition", "account", "qos"):
        if f"invalid {key}" in low:
            return ManifestError(f"{where}: compute.slurm.{key}: the cluster refused it: {words}")
    if (
        "requested node configuration is not available" in low
        or "more processors requested" in low
        or "node count specification invalid" in low
    ):
        return PlacementError(f"compute.target: slurm: this job can never run on the cluster: {words}")
    return ClusterError(f"sbatch refused the job: {words}")


def qos_limits(qos: str) -> str:
    """The QoS's limits as sacctmgr tells them ("MaxTRES=gres/gpu=1, MaxWall=00:10:00"); "" where it
    does not (no sacctmgr, no accounting, an answer that is not one QoS's line)."""
    if shutil.which("sacctmgr") is None:
        return ""
    try:
        result = run(["sacctmgr", "-n", "-P", "show", "qos", qos, f"format={','.join(QOS_FIELDS)}"])
    except FatalError:
        return ""
    lines = result.stdout.strip().splitlines() if result.returncode == 0 else []
    values = lines[0].split("|") if len(lines) == 1 else []
    if len(values) != len(QOS_FIELDS):
        return ""
    said = [f"{name}={one_line(value)[:80]}" for name, value in zip(QOS_FIELDS, values) if value.strip()]
    return ", ".join(said)


def test_only(options: list[str], where: str) -> None:
    """`sbatch --test-only`: what Slurm can refuse, before anything is recorded or submitted."""
    result = run([require(), "--test-only", *options, "--wrap", "true"])
    if result.returncode != 0:
        qos = [option.partition("=")[2] for option in options if option.startswith("--qos=")]
        raise judge_refusal(result.stderr, where, qos[-1] if qos else None)


def submit(script: Path, env: dict[str, str], where: str, name: str, comment: str, warn: Callable[[str], None]) -> str:
    """The job's id; `env`: sbatch's whole environment, which Slurm exports to every task. A submission
    sbatch does not confirm (no answer in time, no job id in its answer, the controller's timeout)
    may have reached slurmctld all the same: the job is looked for by its name and this home's
    comment, adopted when there is one (`warn` says so), canceled when there are more, and the
    run fails (ClusterError) when none is found."""
    try:
        result = run([require(), "--parsable", str(script)], env=env)
    except Silent as silent:
        return _adopt(name, comment, str(silent), warn)
    if result.returncode != 0:
        refused = judge_refusal(result.stderr, where)
        if type(refused) is ClusterError:  # not a refusal of the request: the controller's trouble
            return _adopt(name, comment, str(refused), warn)
        raise refused
    match = JOB_ID.match(result.stdout.strip())
    if match is None:
        return _adopt(name, comment, f"sbatch answered no job id ({one_line(result.stdout.strip())[:200]!r})", warn)
    return match.group(1)


def _adopt(name: str, comment: str, why: str, warn: Callable[[str], None]) -> str:
    try:
        found = jobs_named(name, comment, every_state=True)
    except FatalError as exc:
        raise ClusterError(
            f"{why}; whether job {name} was submitted is not known ({exc}): once slurmctld answers, "
            f"`squeue --me -n {name}` and scancel it"
        ) from None
    if len(found) == 1:
        warn(f"{why}; Slurm job {found[0]} ({name}) is in the queue: tftrain supervises it")
        return found[0]
    for job_id in found:
        cancel(job_id)
    gone = (
        f": jobs {', '.join(found)} of that name were canceled"
        if found
        else ", and no job of that name is in the queue"
    )
    raise ClusterError(f"{why}{gone}")


def parse_fields(text: str) -> dict[str, str]:
    """`scontrol -o show job`: KEY=VALUE words on one line (values without spaces, except the last ones)."""
    fields = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def exit_of(text: str) -> tuple[int | None, int | None]:
    """ExitCode=N:S → (N, S)."""
    match = re.fullmatch(r"(\d{1,3}):(\d{1,3})", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def elapsed_of(fields: dict[str, str]) -> float | None:
    """EndTime − StartTime (scontrol's and the jobcomp record's ISO times) of an ended job."""
    try:
        start, end = (datetime.fromisoformat(fields.get(key, "")) for key in ("StartTime", "EndTime"))
    except ValueError:  # "Unknown", "None", a record cut short
        return None
    seconds = (end - start).total_seconds()
    return seconds if 0 <= seconds < 10**9 else None


def info_from(fields: dict[str, str]) -> JobInfo:
    code, sig = exit_of(fields.get("ExitCode", ""))
    reason = fields.get("Reason", "")
    state = JobState.parse(fields.get("JobState", ""))
    restarts = fields.get("Restarts", "")
    return JobInfo(
        state,
        "" if reason == "None" else reason,
        code,
        sig,
        elapsed_of(fields) if state.ended else None,
        int(restarts) if restarts.isdigit() and len(restarts) < 7 else 0,
    )


def job_info(job_id: str, jobcomp: Callable[[], Path | None]) -> JobInfo | None:
    """The job's state: scontrol while slurmctld remembers it, else sacct where accounting answers,
    else the jobcomp file (`jobcomp()`: where it is); None when nothing knows the job. ClusterError
    when slurmctld does not answer."""
    result = run(["scontrol", "-o", "show", "job", job_id])
    if result.returncode == 0 and result.stdout.strip():
        return info_from(parse_fields(result.stdout))
    if not unknown(result, job_id):
        raise ClusterError(f"scontrol show job {job_id}: {refusal(result.stderr)}")
    accounted = from_sacct(job_id)
    if accounted is not None:
        return accounted
    path = jobcomp()
    return from_jobcomp(job_id, path) if path else None


def unknown(result: subprocess.CompletedProcess, job_id: str) -> bool:
    """scontrol's words that slurmctld does not know the job: "Invalid job id specified", or, for an array
    task not (or no longer) in its array, one scanceled while PENDING beside others, "Job A_i not found"."""
    said = [line.strip() for line in (result.stdout + "\n" + result.stderr).lower().splitlines()]
    return "invalid job id" in result.stderr.lower() or f"job {job_id} not found" in said


def from_sacct(job_id: str) -> JobInfo | None:
    """sacct's record of the job; None where there is no sacct, no accounting, or no record."""
    if shutil.which("sacct") is None:
        return None
    try:
        result = run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode,ElapsedRaw"])
    except FatalError:  # slurmdbd not answering is no verdict on the job
        return None
    line = result.stdout.strip().splitlines()[:1] if result.returncode == 0 else []
    words = line[0].split("|") if line else []
    if len(words) != 3:
        return None
    number, sig = exit_of(words[1])
    state = JobState.parse(words[0])
    elapsed = float(words[2]) if words[2].isdigit() and state.ended else None
    return JobInfo(state, "", number, sig, elapsed)


def from_jobcomp(job_id: str, path: Path) -> JobInfo | None:
    """jobcomp/filetxt's record of the job: its last line that names it (an array task, A_i, by its
    ArrayJobId and ArrayTaskId: the record's JobId is the task's own number)."""
    array, _, index = job_id.partition("_")
    try:
        with path.open(errors="replace") as handle:
            if not index:
                records = [parse_fields(line) for line in handle if line.startswith(f"JobId={job_id} ")]
            else:
                records = [
                    fields
                    for fields in map(parse_fields, handle)
                    if fields.get("ArrayJobId") == array and fields.get("ArrayTaskId") == index
                ]
    except OSError:
        return None
    return info_from(records[-1]) if records else None


def jobcomp_file() -> Path | None:
    """Where slurm.conf keeps the jobcomp/filetxt records (JobCompLoc), if it does (None as well
    while slurmctld does not answer)."""
    try:
        result = run(["scontrol", "show", "config"])
    except FatalError:
        return None
    fields = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("JobCompType") == "jobcomp/filetxt" and fields.get("JobCompLoc", "").startswith("/"):
        return Path(fields["JobCompLoc"])
    return None


def cancel(job_id: str, signal_name: str | None = None) -> None:
    """scancel: a signal to the job's steps (the tasks, through rank.py; not the batch shell, whose
    end would end them all at once), or the job's end."""
    argv = ["scancel", *([f"--signal={signal_name}"] if signal_name else []), job_id]
    run(argv)


def jobs_named(name: str, comment: str, every_state: bool = False) -> list[str]:
    """Ids of this user's jobs with that name and comment in the queue (a lost run's); `every_state`:
    also those that ended and that slurmctld still remembers."""
    if shutil.which("squeue") is None:
        return []
    result = run(["squeue", "-h", "--me", "-n", name, "-o", "%i|%k", *(["-t", "all"] if every_state else [])])
    if result.returncode != 0:
        raise ClusterError(f"squeue: {refusal(result.stderr)}")
    found: list[str] = []
    for line in result.stdout.splitlines():
        job_id, _, their_comment = line.strip().partition("|")
        job_id, plus, offset = job_id.partition("+")  # a heterogeneous job: N+0, N+1, …; N is the whole job
        array = ARRAY_ID.match(job_id)
        if array is not None:  # an array job's tasks, one line each or some together: A is the whole job
            job_id = array.group(1)
        if their_comment == comment and JOB_ID.match(job_id) and (not plus or offset == "0") and job_id not in found:
            found.append(job_id)
    return found


def has_pmix() -> bool | None:
    """Whether `srun --mpi=list` offers pmix; None where there is no srun here."""
    if shutil.which("srun") is None:
        return None
    result = run(["srun", "--mpi=list"])
    return result.returncode == 0 and re.search(r"^\s*pmix\b", result.stdout + result.stderr, re.M) is not None
