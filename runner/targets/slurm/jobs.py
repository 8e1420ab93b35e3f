"""Slurm's commands, as tftrain uses them: sbatch (--test-only first), scontrol for a job's state,
sacct where slurmdbd answers, the jobcomp file after both forgot it, scancel, squeue by name.

Every answer is parsed as hostile text: a state tftrain does not know is none of its own, a line
that does not parse is no job. Each command runs with a time limit; a controller that does not
answer is ClusterError, one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from runner.errors import ClusterError, ManifestError, PlacementError, UnsupportedError

COMMAND_SECONDS = 30.0
JOB_ID = re.compile(r"^(\d{1,12})(;[^\s]*)?$")


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


ENDED = frozenset({
    JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.DEADLINE,
    JobState.NODE_FAIL, JobState.PREEMPTED, JobState.OUT_OF_MEMORY, JobState.BOOT_FAIL,
})


@dataclass(frozen=True, slots=True)
class JobInfo:
    state: JobState
    reason: str = ""
    exit_code: int | None = None  # the batch script's, from ExitCode=N:S
    signal: int | None = None


def require(program: str = "sbatch") -> str:
    path = shutil.which(program)
    if path is None:
        raise UnsupportedError(
            f"compute.target: slurm needs {program} on PATH (run tftrain on a login node of the cluster; "
            "Debian/Ubuntu: apt-get install slurm-client)"
        )
    return path


def run(argv: list[str], stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False, env=env,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{argv[0]} did not answer in {COMMAND_SECONDS:g} s: is slurmctld running?") from None
    except OSError as exc:
        raise UnsupportedError(f"cannot run {argv[0]}: {exc.strerror}") from None


def refusal(stderr: str) -> str:
    """Slurm's own words: its last `error:` line, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    return (errors or lines or ["no reason given"])[-1][:500]


def judge_refusal(stderr: str, where: str) -> Exception:
    """sbatch's refusal as tftrain's error: the manifest key it is about where Slurm says."""
    words = refusal(stderr)
    low = stderr.lower()
    if "unable to contact slurm controller" in low or "connection refused" in low or "socket timed out" in low:
        return ClusterError(f"slurmctld does not answer ({words}); is the cluster up? (SLURM_CONF={os.environ.get('SLURM_CONF', '/etc/slurm/slurm.conf')})")
    for key in ("partition", "account", "qos"):
        if f"invalid {key}" in low:
            return ManifestError(f"{where}: compute.slurm.{key}: the cluster refused it: {words}")
    if "requested node configuration is not available" in low or "more processors requested" in low or "node count specification invalid" in low:
        return PlacementError(f"compute.target: slurm: this job can never run on the cluster: {words}")
    return ClusterError(f"sbatch refused the job: {words}")


def test_only(options: list[str], where: str) -> None:
    """`sbatch --test-only`: what Slurm can refuse, before anything is recorded or submitted."""
    result = run([require(), "--test-only", *options, "--wrap", "true"])
    if result.returncode != 0:
        raise judge_refusal(result.stderr, where)


def submit(script: Path, env: dict[str, str], where: str) -> str:
    """The job's id; `env`: sbatch's whole environment, which Slurm exports to every task."""
    result = run([require(), "--parsable", str(script)], env=env)
    if result.returncode != 0:
        raise judge_refusal(result.stderr, where)
    match = JOB_ID.match(result.stdout.strip())
    if match is None:
        raise ClusterError(f"sbatch answered no job id: {result.stdout.strip()[:200]!r}")
    return match.group(1)


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


def info_from(fields: dict[str, str]) -> JobInfo:
    code, sig = exit_of(fields.get("ExitCode", ""))
    reason = fields.get("Reason", "")
    return JobInfo(JobState.parse(fields.get("JobState", "")), "" if reason == "None" else reason, code, sig)


def job_info(job_id: str, jobcomp: Path | None) -> JobInfo | None:
    """The job's state: scontrol while slurmctld remembers it, else sacct, else the jobcomp file;
    None when nothing knows the job. ClusterError when slurmctld does not answer."""
    result = run(["scontrol", "-o", "show", "job", job_id])
    if result.returncode == 0 and result.stdout.strip():
        return info_from(parse_fields(result.stdout))
    if "invalid job id" not in result.stderr.lower():
        raise ClusterError(f"scontrol show job {job_id}: {refusal(result.stderr)}")
    accounted = run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"])
    line = accounted.stdout.strip().splitlines()[:1] if accounted.returncode == 0 else []
    if line and "|" in line[0]:
        state, code = line[0].split("|", 1)
        number, sig = exit_of(code)
        return JobInfo(JobState.parse(state), "", number, sig)
    return from_jobcomp(job_id, jobcomp) if jobcomp else None


def from_jobcomp(job_id: str, path: Path) -> JobInfo | None:
    """jobcomp/filetxt's record of the job: its last line that names it."""
    try:
        with path.open(errors="replace") as handle:
            lines = [line for line in handle if line.startswith(f"JobId={job_id} ")]
    except OSError:
        return None
    return info_from(parse_fields(lines[-1])) if lines else None


def jobcomp_file() -> Path | None:
    """Where slurm.conf keeps the jobcomp/filetxt records (JobCompLoc), if it does."""
    result = run(["scontrol", "show", "config"])
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


def jobs_named(name: str, comment: str) -> list[str]:
    """Ids of this user's jobs with that name and comment still in the queue (a lost run's)."""
    if shutil.which("squeue") is None:
        return []
    result = run(["squeue", "-h", "--me", "-n", name, "-o", "%i|%k"])
    found = []
    for line in result.stdout.splitlines():
        job_id, _, their_comment = line.strip().partition("|")
        if their_comment == comment and JOB_ID.match(job_id):
            found.append(job_id)
    return found


def has_pmix() -> bool | None:
    """Whether `srun --mpi=list` offers pmix; None where there is no srun here."""
    if shutil.which("srun") is None:
        return None
    result = run(["srun", "--mpi=list"])
    return result.returncode == 0 and re.search(r"^\s*pmix\b", result.stdout + result.stderr, re.M) is not None
