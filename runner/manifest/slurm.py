"""`compute.slurm`: where and how the Slurm target submits (runner/targets/slurm). Every value here
ends up as one `#SBATCH` line of the batch script, so each is checked as one word: no newline, and
no option tftrain sets itself."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from runner.manifest.distributed import ParameterServerTraining
from runner.manifest.fields import Model, empty_list

if TYPE_CHECKING:
    from runner.manifest.document import Location

SLURM_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # partition, account, qos names
CONSTRAINT_PATTERN = r"^[A-Za-z0-9._:*&|,\[\]()-]{1,256}$"  # Slurm's --constraint expression

# The options of the batch script tftrain writes: a user's extra_args may not set them again.
# Long names; the short ones map to them.
OWN_OPTIONS = frozenset(
    {
        "nodes",
        "ntasks",
        "ntasks-per-node",
        "cpus-per-task",
        "gres",
        "gpus",
        "gpus-per-node",
        "gpus-per-task",
        "time",
        "job-name",
        "output",
        "error",
        "signal",
        "partition",
        "account",
        "qos",
        "constraint",
        "comment",
        "chdir",
        "export",
        "wrap",
        "parsable",
        "test-only",
        "array",
        "open-mode",
        "no-requeue",
        "requeue",
    }
)
SHORT_OPTIONS = {
    "N": "nodes",
    "n": "ntasks",
    "c": "cpus-per-task",
    "G": "gpus",
    "t": "time",
    "J": "job-name",
    "o": "output",
    "e": "error",
    "p": "partition",
    "A": "account",
    "q": "qos",
    "C": "constraint",
    "D": "chdir",
    "a": "array",
}

# Slurm's --time forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds
SLURM_TIME = re.compile(
    r"^(?:(\d{1,3})-(\d{1,2})(?::(\d{1,2})(?::(\d{1,2}))?)?|(\d{1,6})(?::(\d{1,2})(?::(\d{1,2}))?)?)$"
)
MAX_TIME_LIMIT_MINUTES = 365 * 24 * 60


def time_limit_minutes(value: int | str) -> int:
    """compute.slurm.time_limit in whole minutes (seconds round up: Slurm counts its limits by the minute).
    ValueError for anything that is not one of Slurm's --time forms, or not above zero."""
    if isinstance(value, int):
        minutes = value
    else:
        match = SLURM_TIME.match(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is not a Slurm time: minutes, or D-HH:MM:SS (also HH:MM:SS, MM:SS, D-HH)")
        days, d_hours, d_minutes, d_seconds, plain, second, third = match.groups()
        if days is not None:
            seconds = ((int(days) * 24 + int(d_hours)) * 60 + int(d_minutes or 0)) * 60 + int(d_seconds or 0)
        elif third is not None:  # hours:minutes:seconds
            seconds = (int(plain) * 60 + int(second)) * 60 + int(third)
        else:  # minutes[:seconds]
            seconds = int(plain) * 60 + int(second or 0)
        minutes = math.ceil(seconds / 60)
    if not 1 <= minutes <= MAX_TIME_LIMIT_MINUTES:
        raise ValueError(f"{value!r} must be between 1 minute and 365 days")
    return minutes


# sbatch's short options that take no value: getopt reads what follows them in one item as more options
FLAG_LETTERS = frozenset("hHkOQsuvVW")


def _option_names(item: str) -> list[str]:
    """The options one item sets as sbatch's getopt reads it: `--name[=value]` (a long name may be any
    unambiguous prefix: `--nod=4` is --nodes), or a cluster of short ones (`-vN4` is -v -N 4)."""
    if item.startswith("--"):
        given = item[2:].split("=", 1)[0]
        return sorted(name for name in OWN_OPTIONS if name.startswith(given)) or [given]
    names = []
    for letter in item[1:]:
        names.append(SHORT_OPTIONS.get(letter, letter))
        if letter not in FLAG_LETTERS:
            break  # the rest of the item is this option's value
    return names


def extra_arg_problem(item: str) -> str | None:
    """Why one extra_args item cannot go into the batch script (None: it can)."""
    if any(char in item for char in "\n\r\0"):
        return "holds a line break or NUL: each item is one sbatch option on one #SBATCH line"
    if not item.startswith("-") or item in ("-", "--"):
        return "is not an sbatch option (it must start with - or --)"
    own = [name for name in _option_names(item) if name in OWN_OPTIONS]
    if own:
        return f"sets --{own[0]}, which tftrain sets itself (use the manifest's keys)"
    if any(char.isspace() for char in item):
        return "holds a space: give the option and its value as one item, --name=value"
    return None


class SlurmSpec(Model):
    partition: str | None = Field(
        default=None, pattern=SLURM_NAME_PATTERN, description="Partition (default: the cluster's default)"
    )
    account: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN, description="Account to charge (--account)")
    qos: str | None = Field(default=None, pattern=SLURM_NAME_PATTERN, description="Quality of service (--qos)")
    constraint: str | None = Field(
        default=None, pattern=CONSTRAINT_PATTERN, description="Node features the job needs (--constraint)"
    )
    extra_args: list[str] = Field(
        default_factory=empty_list,
        max_length=64,
        description="More sbatch options, one item each (--exclusive, --mem=8G); not the ones tftrain sets",
    )
    mpi: Literal["auto", "pmix", "mpirun"] = Field(
        default="auto",
        description=(
            "How MPI ranks start: srun --mpi=pmix, or mpirun inside the allocation; auto: pmix where `srun --mpi=list`"
            " offers it"
        ),
    )
    time_limit: int | str | None = Field(
        default=None,
        description=(
            "The longest one job may run (--time: minutes, or D-HH:MM:SS): at it the training gets SIGTERM"
            " (stop_grace_seconds before), then the same job is requeued and resumes from its BackupAndRestore"
            " backup, until the training ends or max_run_duration_seconds runs out"
        ),
    )
    heterogeneous: bool = Field(
        default=False,
        description=(
            "A parameter-server job as one Slurm heterogeneous job: the chief and the parameter servers in one"
            " component (ps_partition, no GPUs), the workers and the evaluator in another (partition, GPUs)"
        ),
    )
    ps_partition: str | None = Field(
        default=None,
        pattern=SLURM_NAME_PATTERN,
        description="The partition of a heterogeneous job's chief and parameter servers (default: partition)",
    )
    array: bool = Field(
        default=True,
        description=(
            "A sweep's trials that start together go to Slurm as one array job (--array=0-K%max_concurrent_trials),"
            " each trial one task of it; false: one job per trial"
        ),
    )
    shared_dir: str | None = Field(
        default=None,
        description=(
            "A directory every node sees: tftrain refuses to run unless TFTRAIN_HOME and the environment cache are"
            " inside it (default: not checked; they must be shared anyway)"
        ),
    )

    @field_validator("extra_args")
    @classmethod
    def _one_option_each(cls, items: list[str]) -> list[str]:
        for index, item in enumerate(items):
            problem = extra_arg_problem(item)
            if problem:
                raise ValueError(f"[{index}] {item!r} {problem}")
        return items

    @field_validator("time_limit", mode="before")
    @classmethod
    def _slurm_time(cls, value: object) -> object:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ValueError("must be minutes or D-HH:MM:SS")
            time_limit_minutes(value)
        return value

    @property
    def time_limit_minutes(self) -> int | None:
        return None if self.time_limit is None else time_limit_minutes(self.time_limit)

    @field_validator("shared_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or "\n" in value or "\0" in value):
            raise ValueError("must be an absolute path")
        return value


def check_slurm(manifest) -> list[tuple[Location, str]]:
    """compute.slurm.time_limit against the manifest's own limits: a job requeued at its time limit
    must run longer than the stop grace, and less than the whole training may."""
    spec = manifest.compute.slurm
    problems = _check_heterogeneous(manifest)
    minutes = spec.time_limit_minutes
    if minutes is None:
        return problems
    where = ("compute", "slurm", "time_limit")
    limit = manifest.max_run_duration_seconds
    if limit is not None and minutes * 60 >= limit:
        return problems + [
            (
                where,
                f"{manifest.compute.slurm.time_limit!r} ({minutes} min) is not below max_run_duration_seconds"
                f" ({limit}): the job would never be requeued; lower it, or drop it and let"
                " max_run_duration_seconds set the job's --time",
            )
        ]
    if manifest.grace_seconds >= minutes * 60:
        return problems + [
            (
                where,
                f"{manifest.compute.slurm.time_limit!r} ({minutes} min) leaves no time to train: the stop grace"
                f" ({manifest.grace_seconds:g} s) comes before it",
            )
        ]
    return problems


def _check_heterogeneous(manifest) -> list[tuple[Location, str]]:
    spec = manifest.compute.slurm
    if spec.ps_partition is not None and not spec.heterogeneous:
        return [(("compute", "slurm", "ps_partition"), "is only for a heterogeneous job: set heterogeneous: true too")]
    if not spec.heterogeneous:
        return []
    where = ("compute", "slurm", "heterogeneous")
    if not isinstance(manifest.distributed_training, ParameterServerTraining):
        return [
            (
                where,
                "only a parameter-server job (distributed_training.backend: parameter_server) has components"
                " to split: its chief and parameter servers, and its workers",
            )
        ]
    if spec.time_limit is not None:
        return [(where, "a heterogeneous job is not requeued at a time limit: drop compute.slurm.time_limit")]
    return []
