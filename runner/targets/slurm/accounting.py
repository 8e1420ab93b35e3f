"""Slurm's accounting (sacct, where slurmdbd keeps it) as the source of a job's final figures: its
State, ExitCode, Elapsed and AllocTRES (cpu, mem, gres/gpu), read once the job ended, over every
start of a requeued job (sacct -D: one record per start; Slurm's own record is the last start's
alone), its elapsed times added. Where there
is no accounting (no sacct, accounting disabled) the target keeps what it had: scontrol's (or the
jobcomp file's) EndTime − StartTime, else tftrain's own clock. Where accounting answers what does
not parse (garbage, bytes that are not UTF-8, a missing field, a job that never ends in it), or
does not answer (slurmdbd down), one warning says so and the same fallback decides."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from runner.errors import FatalError
from runner.history.usage import Allocation
from runner.targets.slurm import jobs
from runner.targets.slurm.jobs import JobInfo, JobState

FORMAT = "State,ExitCode,Elapsed,AllocTRES,Start"
FIELDS = len(FORMAT.split(","))
SETTLE_SECONDS = 10.0  # slurmctld tells slurmdbd of a job's end a moment after it ends
SETTLE_EVERY = 0.5
ELAPSED = re.compile(r"(?:(\d{1,5})-)?(\d{1,2}):(\d{2}):(\d{2})")
MEMORY = re.compile(r"(\d{1,15})([KMGTP]?)")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
DISABLED = "accounting storage is disabled"  # sacct's words where slurm.conf keeps no accounting


class Unreadable(ValueError):
    """sacct's answer is not a record tftrain can read."""


class NotYet(Unreadable):
    """No record of the job yet: slurmdbd hears of it from slurmctld a moment later."""


@dataclass(frozen=True, slots=True)
class Accounted:
    state: JobState
    exit_code: str  # N:S
    elapsed: float
    cpus: int | None
    mem_bytes: int | None
    gpus: int | None
    billing: int | None = None  # the cluster's TRESBillingWeights applied to the allocation
    starts: int = 1  # a requeued job's: its elapsed is every start's, the rest the last start's


def parse(text: str, components: int = 1) -> Accounted:
    """`sacct -X -D -n -P --format=FORMAT`'s lines: a record per start of the job (a heterogeneous
    job: one per component and start, a start's summed: its TRES added, its longest elapsed, the
    first state that is not COMPLETED); the starts' elapsed added, the rest the last start's.
    Unreadable, with why, for anything else."""
    if "\ufffd" in text:
        raise Unreadable("its answer is not UTF-8 text")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NotYet("it has no record of the job")
    starts: dict[str, list[Accounted]] = {}  # by when the start began, in sacct's (submission) order
    for line in lines:
        start, record = _record(line)
        starts.setdefault(start, []).append(record)
    for records in starts.values():
        if len(records) != components:
            raise Unreadable(
                f"{len(records)} records of one start where {components} {'was' if components == 1 else 'were'}"
                " asked for"
            )
    each = [_start(records) for records in starts.values()]
    return replace(each[-1], elapsed=sum(start.elapsed for start in each), starts=len(each))


def _start(records: list[Accounted]) -> Accounted:
    worst = next((record for record in records if record.state != JobState.COMPLETED), records[0])
    return Accounted(
        worst.state,
        worst.exit_code,
        max(record.elapsed for record in records),
        *(_total([getattr(record, name) for record in records]) for name in ("cpus", "mem_bytes", "gpus", "billing")),
    )


def _total(counts: list[int | None]) -> int | None:
    known = [count for count in counts if count is not None]
    return sum(known) if known else None


def _record(line: str) -> tuple[str, Accounted]:
    """(when its start began, as sacct says it, the record)."""
    fields = line.strip().split("|")
    if len(fields) != FIELDS:
        raise Unreadable(f"{len(fields)} fields where {FORMAT} asks for {FIELDS}")
    state_word, exit_code, elapsed, tres, start = fields
    state = JobState.parse(state_word)
    if state == JobState.OTHER:
        raise Unreadable(f"state {state_word[:40]!r} is none Slurm has")
    if jobs.exit_of(exit_code) == (None, None):
        raise Unreadable(f"exit code {exit_code[:40]!r} is not N:S")
    match = ELAPSED.fullmatch(elapsed)
    if match is None:
        raise Unreadable(f"elapsed {elapsed[:40]!r} is not [D-]HH:MM:SS")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    counts = _tres(tres)
    return start[:40], Accounted(
        state,
        exit_code,
        float(((days * 24 + hours) * 60 + minutes) * 60 + seconds),
        counts.get("cpu"),
        counts.get("mem"),
        counts.get("gres/gpu"),
        counts.get("billing"),
    )


def _tres(text: str) -> dict[str, int]:
    """AllocTRES: name=count,… (mem with a unit); empty for a job that never held anything."""
    counts: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name or name in counts:
            raise Unreadable(f"AllocTRES item {item[:40]!r} is not name=count")
        if name == "mem":
            match = MEMORY.fullmatch(value)
            if match is None:
                raise Unreadable(f"AllocTRES mem {value[:40]!r} is not a size")
            counts[name] = int(match.group(1)) * UNITS[match.group(2)]
        elif value.isdigit() and len(value) <= 15:
            counts[name] = int(value)
        elif name in ("cpu", "gres/gpu"):
            raise Unreadable(f"AllocTRES {name} {value[:40]!r} is not a count")
    return counts


class NoAccounting(Exception):
    """This cluster keeps no accounting tftrain can ask: the target's own figures decide, unsaid."""


def ask(job_id: str, components: int = 1) -> Accounted:
    """The job's record; NoAccounting where there is none to ask, Unreadable (or the scheduler's
    FatalError) where accounting fails to give one."""
    if shutil.which("sacct") is None:
        raise NoAccounting
    result = jobs.run(["sacct", "-j", job_id, "-X", "-D", "-n", "-P", f"--format={FORMAT}"])
    if result.returncode != 0:
        if DISABLED in result.stderr.lower():
            raise NoAccounting
        raise Unreadable(f"sacct failed: {jobs.refusal(result.stderr)}")
    return parse(result.stdout, components)


def settled(job_id: str, components: int = 1, wait: bool = True) -> tuple[Accounted | None, str | None]:
    """(the job's record once accounting has it ended, None): asked again for up to SETTLE_SECONDS
    (`wait`) while it has none yet, or has the job still running; (None, None) where there is no accounting;
    (None, why) where it gives none tftrain can read: garbage, or slurmdbd not answering, is not asked again."""
    deadline = time.monotonic() + (SETTLE_SECONDS if wait else 0.0)
    while True:
        again = True
        try:
            record = ask(job_id, components)
        except NoAccounting:
            return None, None
        except NotYet as exc:
            why = str(exc)
        except (Unreadable, FatalError) as exc:
            why, again = str(exc), False
        else:
            if record.state.ended:
                return record, None
            why = f"job {job_id} is still {record.state.value} in it"
        if not again or time.monotonic() >= deadline:
            return None, why
        time.sleep(SETTLE_EVERY)


def allocation_of(
    job_id: str,
    info: JobInfo | None,
    seen_seconds: float | None,
    warn: Callable[[str], None],
    components: int = 1,
    started: bool = True,
) -> tuple[float | None, Allocation]:
    """(the seconds the job held its allocation, who said so): sacct's record where accounting has
    one; else scontrol's EndTime − StartTime (`info`), else what tftrain saw (`seen_seconds`). Accounting
    that fails to give a record is said once, by `warn`. `components`: a heterogeneous job's count.
    A job that never `started` is asked about once, and no record of it is no failure (an array task
    scanceled while PENDING beside others leaves none)."""
    record, why = settled(job_id, components, wait=started)
    why = why if started else None
    if record is not None:
        return record.elapsed, Allocation(
            source="sacct",
            job_id=job_id,
            state=record.state.value,
            exit_code=record.exit_code,
            elapsed_seconds=record.elapsed,
            cpus=record.cpus,
            mem_bytes=record.mem_bytes,
            gpus=record.gpus,
            billing=record.billing,
            starts=record.starts,
        )
    state = info.state.value if info is not None else None
    if info is not None and info.elapsed is not None:
        fallback = Allocation(source="scontrol", job_id=job_id, state=state, elapsed_seconds=info.elapsed)
    else:
        seen = round(seen_seconds, 3) if seen_seconds is not None else None
        fallback = Allocation(source="tftrain", job_id=job_id, state=state, elapsed_seconds=seen)
    if why is not None:
        instead = "slurmctld's (scontrol)" if fallback.source == "scontrol" else "tftrain's clock"
        warn(f"Slurm accounting (sacct) gives no usable record of job {job_id}: {why}; usage from {instead} instead")
    return fallback.elapsed_seconds, fallback


def said(allocation: Allocation) -> str:
    """The console's line: which source decided the job's usage, and its figures."""
    if allocation.source == "sacct":
        tres = ", ".join(
            f"{name}={value}"
            for name, value in (("cpu", allocation.cpus), ("gres/gpu", allocation.gpus), ("mem", allocation.mem_bytes))
            if value is not None
        )
        agreement = allocation.agreement()
        starts = f" over {allocation.starts} starts" if allocation.starts and allocation.starts > 1 else ""
        return (
            f"usage from Slurm accounting (sacct): job {allocation.job_id} {allocation.state} exit"
            f" {allocation.exit_code}, {allocation.elapsed_seconds:g} s{starts}"
            + (f", {tres}" if tres else "")
            + (f"; {agreement}" if agreement else "")
        )
    if allocation.source == "scontrol":
        return f"usage from slurmctld (scontrol): job {allocation.job_id}, {allocation.elapsed_seconds:g} s"
    seconds = allocation.elapsed_seconds
    return f"usage from tftrain's clock: Slurm job {allocation.job_id}" + (f", {seconds:g} s" if seconds else "")
