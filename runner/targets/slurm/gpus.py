"""How many GPUs Slurm allocates to a batch request, from every form sbatch takes a GPU request
in (tftrain's own --gres=gpu:N and whatever compute.slurm.extra_args adds): what usage and cost
count. Each form is a floor Slurm must meet, so the job holds the largest of them."""

from __future__ import annotations

import re

from runner.targets.slurm.script import BatchRequest

# sbatch's long options (22.05 and the newer --tres-per-task): a long name may be given as any
# unambiguous prefix of one of them, as getopt reads it
SBATCH_OPTIONS = (
    "account",
    "acctg-freq",
    "array",
    "batch",
    "bb",
    "bbf",
    "begin",
    "chdir",
    "cluster-constraint",
    "clusters",
    "comment",
    "constraint",
    "container",
    "contiguous",
    "core-spec",
    "cores-per-socket",
    "cpu-freq",
    "cpus-per-gpu",
    "cpus-per-task",
    "deadline",
    "delay-boot",
    "dependency",
    "distribution",
    "error",
    "exclude",
    "exclusive",
    "export",
    "export-file",
    "extra-node-info",
    "get-user-env",
    "gid",
    "gpu-bind",
    "gpu-freq",
    "gpus",
    "gpus-per-node",
    "gpus-per-socket",
    "gpus-per-task",
    "gres",
    "gres-flags",
    "help",
    "hint",
    "hold",
    "ignore-pbs",
    "input",
    "job-name",
    "kill-on-invalid-dep",
    "licenses",
    "mail-type",
    "mail-user",
    "mcs-label",
    "mem",
    "mem-bind",
    "mem-per-cpu",
    "mem-per-gpu",
    "mincpus",
    "network",
    "nice",
    "no-kill",
    "no-requeue",
    "nodefile",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-core",
    "ntasks-per-gpu",
    "ntasks-per-node",
    "ntasks-per-socket",
    "open-mode",
    "output",
    "overcommit",
    "oversubscribe",
    "parsable",
    "partition",
    "power",
    "priority",
    "profile",
    "propagate",
    "qos",
    "quiet",
    "reboot",
    "requeue",
    "reservation",
    "signal",
    "sockets-per-node",
    "spread-job",
    "switches",
    "test-only",
    "thread-spec",
    "threads-per-core",
    "time",
    "time-min",
    "tmp",
    "tres-per-task",
    "uid",
    "usage",
    "use-min-nodes",
    "verbose",
    "version",
    "wait",
    "wait-all-nodes",
    "wckey",
    "wrap",
)
SHORT = {"G": "gpus", "N": "nodes", "n": "ntasks"}
COUNT = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?(\d{1,6})$")  # [type:]N
TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")  # a GPU type alone: one of it


def long_name(given: str) -> str | None:
    """The sbatch option `--given` is (an exact name, or the one name it is a prefix of)."""
    if given in SBATCH_OPTIONS:
        return given
    found = [name for name in SBATCH_OPTIONS if name.startswith(given)]
    return found[0] if len(found) == 1 else None


def parse_options(items: list[str]) -> dict[str, list[str]]:
    """sbatch options, one item each (--name=value, -Xvalue): name → its values, in order."""
    options: dict[str, list[str]] = {}
    for item in items:
        if item.startswith("--"):
            given, _, value = item[2:].partition("=")
            name = long_name(given)
        elif item.startswith("-") and len(item) > 1:
            name, value = SHORT.get(item[1]), item[2:]
        else:
            continue
        if name is not None:
            options.setdefault(name, []).append(value)
    return options


def _count(value: str) -> int:
    match = COUNT.match(value.strip())
    return int(match.group(1)) if match else 0


def _count_or_one(rest: str) -> int:
    """What follows `gpu` in a gres: nothing or a type alone is one GPU, `[type:]N` is N."""
    return 1 if not rest or TYPE.match(rest) else _count(rest)


def _gres_gpus(value: str) -> int:
    """--gres=gpu[:type][:N][,other…]: GPUs per node (gpu alone: 1)."""
    total = 0
    for part in value.split(","):
        name, _, rest = part.strip().partition(":")
        if name == "gpu":
            total += _count_or_one(rest)
    return total


def _tres_gpus(value: str) -> int:
    """--tres-per-task=gres/gpu[:type]{=,:}N[,cpu=2…]: GPUs per task."""
    total = 0
    for part in value.split(","):
        part = part.strip()
        if part == "gres/gpu" or part.startswith(("gres/gpu:", "gres/gpu=")):
            rest = part[len("gres/gpu") :].lstrip(":=").replace("=", ":")
            total += _count_or_one(rest)
    return total


def gpus_allocated(request: BatchRequest) -> int:
    """The GPUs the whole job holds: per node × nodes, per task × tasks, per socket × sockets ×
    nodes (Slurm demands --sockets-per-node with it), or a total — the largest of them; a
    heterogeneous job's, component by component."""
    if request.components:
        return sum(gpus_allocated(part) for part in request.components)
    options = parse_options(request.options())
    last = {name: values[-1] for name, values in options.items()}  # sbatch: a repeated option's last value counts
    nodes, tasks = request.nodes, request.ntasks
    sockets = _count(last.get("sockets-per-node", "")) or 1
    floors = [
        _gres_gpus(last.get("gres", "")) * nodes,
        _count(last.get("gpus", "")),
        _count(last.get("gpus-per-node", "")) * nodes,
        _count(last.get("gpus-per-task", "")) * tasks,
        _count(last.get("gpus-per-socket", "")) * sockets * nodes,
        _tres_gpus(last.get("tres-per-task", "")) * tasks,
    ]
    return max(floors)
