"""A sweep's trials on Slurm as array jobs: the trials that are ready together go to Slurm as one
`sbatch --array=0-(K-1)%N` job, task i running trial i's own batch script (launch/slurm.sh, its
#SBATCH lines comments then) in the trial's own directory, its output in the trial's batch.log.
Each trial watches, stops and accounts its own task (job id A_i) exactly as it would its own job.

The array job carries the trials' #SBATCH lines (what they ask for: identical for the trials of one
sweep, or the trial goes alone as today) and, as sbatch's environment, the variables every trial
of the batch has alike (the secrets among them: never in a file); task i gets the rest, which are
no secret, on its own command line (`env -- K=V`) in the array's script.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.targets.slurm import jobs

WINDOW_SECONDS = 3.0  # the longest the first trial of a batch waits for the others to be ready
# the trial's #SBATCH lines that are its own (the array's are its own too): the rest must be alike
OWN = ("--job-name=", "--chdir=", "--output=", "--open-mode=")
SBATCH = re.compile(r"^#SBATCH\s+(\S.*?)\s*$")


@dataclass(frozen=True, slots=True)
class ArrayEntry:
    """One trial's job, as the batcher takes it instead of submitting it."""

    script: Path  # the trial's batch script (launch/slurm.sh)
    job_dir: Path  # its launch directory: batch.log goes there
    workdir: str  # its --chdir
    options: tuple[str, ...]  # its #SBATCH options but its own (OWN)
    env: Mapping[str, str] = field(hash=False)  # sbatch's environment for it (secrets included)
    secrets: frozenset[str] = frozenset()  # the names of its secrets: never written to a file
    comment: str = ""  # its --comment: which TFTRAIN_HOME submitted it (a lost submission is found by it)
    warn: Callable[[str], None] = field(default=print, hash=False, compare=False)  # its run's console


def sbatch_options(script: str) -> tuple[str, ...]:
    """The #SBATCH options of a batch script, in order, but those each trial has its own (OWN)."""
    options = []
    for line in script.splitlines():
        match = SBATCH.match(line)
        if match is not None and not match.group(1).startswith(OWN):
            options.append(match.group(1))
    return tuple(options)


def task_id(array_id: str, index: int) -> str:
    """Slurm's id of one array task: scontrol, sacct and scancel all take A_i."""
    return f"{array_id}_{index}"


def split_env(entries: list[ArrayEntry]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(sbatch's environment: what every entry has alike, each entry's own rest)."""
    first = entries[0].env
    common = {key: value for key, value in first.items() if all(entry.env.get(key) == value for entry in entries)}
    return common, [{k: v for k, v in entry.env.items() if common.get(k) != v} for entry in entries]


def array_script(entries: list[ArrayEntry], own: list[dict[str, str]], name: str, out_dir: Path, throttle: int) -> str:
    """The array job's batch script: the trials' options, task i exec'ing entry i's script in its
    directory with its own variables, its output appended to its batch.log."""
    lines = [
        "#!/bin/bash",
        f"# {len(entries)} trials of a sweep as one Slurm array job, written by tftrain: task i runs trial i's own",
        "# batch script (its #SBATCH lines, alike for all, are repeated here); each trial's run watches its task.",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --output={out_dir}/%A_%a.log",
        f"#SBATCH --array=0-{len(entries) - 1}%{max(1, throttle)}",
        *(f"#SBATCH {option}" for option in entries[0].options),
        'case "${SLURM_ARRAY_TASK_ID:-}" in',
    ]
    for index, (entry, variables) in enumerate(zip(entries, own)):
        command = ["env", "--", *(f"{key}={value}" for key, value in sorted(variables.items()))]
        command += ["/bin/bash", str(entry.script)]
        log = shlex.quote(str(entry.job_dir / "batch.log"))
        lines.append(f"{index}) cd {shlex.quote(entry.workdir)} && exec {shlex.join(command)} >> {log} 2>&1 ;;")
    lines += ["esac", 'echo "tftrain: array task ${SLURM_ARRAY_TASK_ID:-?}: no trial to run" >&2', "exit 1", ""]
    return "\n".join(lines)


def alone_because(entry: ArrayEntry, first: ArrayEntry | None) -> str | None:
    """Why the entry cannot join the batch that `first` opened (None: it can)."""
    if any(option == "hetjob" for option in entry.options):
        return "a heterogeneous job cannot be an array task"
    if first is not None and entry.options != first.options:
        return "its #SBATCH options differ from the other trials'"
    if first is not None and any(first.env.get(name) != entry.env.get(name) for name in entry.secrets | first.secrets):
        return "its secrets' values differ from the other trials' (a secret is never written to the array's script)"
    return None


@dataclass(slots=True)
class _Waiting:
    entry: ArrayEntry
    done: threading.Event = field(default_factory=threading.Event)
    job_id: str | None = None
    failure: BaseException | None = None


# (script, sbatch's environment, job name, comment, warn) → job id: runner.targets.slurm.jobs.submit's
Submit = Callable[[Path, dict[str, str], str, str, Callable[[str], None]], str]


class ArrayBatcher:
    """Shared by one sweep's trials (runner.sweep.driver makes it; a trial's SlurmTarget finds it in
    its Settings): `opened()` as a trial starts (its ArrayTicket closed as its run ends); `submit()` waits until
    every open trial that has not yet submitted is ready (or WINDOW_SECONDS after the first), then
    sends one array job for all of them and gives each its task's id."""

    def __init__(self, out_dir: Path, name: str, throttle: int, submit: Submit, window: float = WINDOW_SECONDS):
        self.out_dir, self.name, self.throttle, self.send, self.window = out_dir, name, throttle, submit, window
        self.lock = threading.Condition()
        self.open = 0  # trials running that have not yet handed their job over
        self.waiting: list[_Waiting] = []
        self.since = 0.0

    def opened(self) -> ArrayTicket:
        """A trial starts: the batch waits for it until it hands its job over or its run ends."""
        with self.lock:
            self.open += 1
        return ArrayTicket(self)

    def _leave(self) -> None:
        with self.lock:
            self.open = max(0, self.open - 1)
            self.lock.notify_all()

    def submit(self, entry: ArrayEntry, ticket: ArrayTicket) -> str | None:
        """The id of the entry's array task (A_i); None where it cannot join an array (the entry's
        `warn` says why) or its ticket was handed over already (a retry's second job): the trial submits its own
        job. Raises what the array's sbatch raised."""
        with self.lock:
            if not ticket.take():
                return None
            self.open = max(0, self.open - 1)  # counted out and queued at once: the batch cannot close between
            self.lock.notify_all()
            why = alone_because(entry, self.waiting[0].entry if self.waiting else None)
            if why is not None:
                entry.warn(f"this trial is submitted as a job of its own, not an array task: {why}")
                return None
            mine = _Waiting(entry)
            if not self.waiting:
                self.since = time.monotonic()
            self.waiting.append(mine)
            while not mine.done.is_set():
                left = self.since + self.window - time.monotonic()
                if self.waiting and self.waiting[0] is mine and (self.open == 0 or left <= 0):
                    batch, self.waiting = self.waiting, []
                    break
                self.lock.wait(max(0.01, min(left, 0.5)))
            else:
                return self._answer(mine)
        self._send(batch)
        return self._answer(mine)

    def _send(self, batch: list[_Waiting]) -> None:
        entries = [waiting.entry for waiting in batch]
        common, own = split_env(entries)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            # a name of its own: another tftrain joining the sweep writes its arrays here too
            handle, name = tempfile.mkstemp(prefix="array-", suffix=".sh", dir=self.out_dir)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(array_script(entries, own, self.job_name(Path(name)), self.out_dir, self.throttle))
            path = Path(name)
            array_id = self.send(path, common, self.job_name(path), entries[0].comment, entries[0].warn)
        except BaseException as exc:  # every trial of the batch fails with it
            for waiting in batch:
                waiting.failure = exc
        else:
            for index, waiting in enumerate(batch):
                waiting.job_id = task_id(array_id, index)
        with self.lock:
            for waiting in batch:
                waiting.done.set()
            self.lock.notify_all()

    def job_name(self, script: Path) -> str:
        """The array's name: the sweep's, and its script's own part, so that a submission sbatch does
        not confirm is looked for (jobs.submit) among this array alone, never the sweep's others."""
        return f"{self.name}-{script.stem.removeprefix('array-')}"

    @staticmethod
    def _answer(mine: _Waiting) -> str:
        if mine.failure is not None:
            raise mine.failure
        assert mine.job_id is not None
        return mine.job_id


class ArrayTicket:
    """One trial's place in its sweep's batcher (runner.settings.Settings.slurm_array): handed over
    once, by submit or by close, whichever comes first."""

    def __init__(self, batcher: ArrayBatcher) -> None:
        self.batcher = batcher
        self.held = True
        self.lock = threading.Lock()

    def take(self) -> bool:
        """Whether it was still held (now it is not)."""
        with self.lock:
            held, self.held = self.held, False
        return held

    def submit(self, entry: ArrayEntry) -> str | None:
        """The trial's array task (A_i), or None: it submits its own job (the entry's `warn` says why)."""
        return self.batcher.submit(entry, self)

    def close(self) -> None:
        """The trial's run ended: the batch no longer waits for it."""
        if self.take():
            self.batcher._leave()


def array_name(sweep_id: str) -> str:
    """The array jobs' name in squeue: the sweep's (its trials' runs are named in their own records)."""
    return "tftrain-sweep-" + re.sub(r"[^A-Za-z0-9._-]", "_", sweep_id)[:64]


def sweep_batcher(out_dir: Path, sweep_id: str, throttle: int) -> ArrayBatcher:
    """The batcher of one sweep's trials: its array scripts and their own output under `out_dir`
    (the sweep's directory, which the nodes see as they see TFTRAIN_HOME)."""

    def send(script: Path, env: dict[str, str], name: str, comment: str, warn: Callable[[str], None]) -> str:
        return jobs.submit(script, env, "compute.slurm", name, comment, warn)

    return ArrayBatcher(out_dir, array_name(sweep_id), throttle, send)


def array_task_queued(path: Path, comment: str) -> list[str]:
    """[A_i]: the array task a lost trial's file names (written as it was submitted; read as hostile
    text), while squeue shows it with this home's comment; [] otherwise."""
    try:
        with path.open("rb") as handle:
            task = handle.read(64).decode("ascii", errors="replace").strip()
    except OSError:
        return []
    if re.fullmatch(r"\d{1,12}_\d{1,7}", task) is None or shutil.which("squeue") is None:
        return []
    result = jobs.run(["squeue", "-h", "-j", task, "-o", "%i|%k"])
    if result.returncode != 0:  # "Invalid job id specified": it ended and slurmctld forgot it
        return []
    lines = [line.strip() for line in result.stdout.splitlines()]
    return [task] if any(line.partition("|")[2] == comment for line in lines) else []
