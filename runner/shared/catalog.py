"""The targets, named once. The manifest's `compute.target`, `--target`'s choices and the factory
derive from TARGETS; adding a target is one folder (runner/targets/NAME/target.py) and one row here.

Light on purpose: the manifest and the CLI import it at start-up, and nothing here imports a backend
(runner.targets.factory does, for the one target a run asks for).
"""

from __future__ import annotations

from typing import Literal, NamedTuple


class TargetRow(NamedTuple):
    """What the rest of tftrain may know of a target without importing it."""

    cls: str  # the class in runner/targets/NAME/target.py
    containers: bool  # runs in the training image, so `use_docker: true` goes with it
    on_this_machine: bool  # the training uses this machine's CPUs, GPUs and run directory (checkpoint sync reads it)
    command: str | None = None  # the module in runner/targets/NAME/ behind `tftrain NAME` (factory.target_command), if any
    own_prices: bool = False  # it may know its prices without compute.cost (the pool file's cost:): Target.listed_prices
    runner_label: str | None = None  # the GitHub runner only dispatches (its hosts or cluster train): the label such a runner has
    plan_file: str | None = None  # the file of its plan `tftrain plan` prints (what the target submits)
    plan_file_caption: str | None = None  # printed under the plan's description with this caption; None: it is the plan, printed alone


# The order is the manifest schema's and --target's
TARGETS: dict[str, TargetRow] = {
    "local": TargetRow("LocalTarget", containers=False, on_this_machine=True),
    "docker": TargetRow("DockerTarget", containers=True, on_this_machine=True),
    "pool": TargetRow("PoolTarget", containers=True, on_this_machine=False, command="survey", own_prices=True, runner_label="tftrain-pool"),
    "kubernetes": TargetRow("KubernetesTarget", containers=True, on_this_machine=False, plan_file="kubernetes.yaml"),
    "slurm": TargetRow("SlurmTarget", containers=False, on_this_machine=False, runner_label="slurm",  # a login node
                       plan_file="slurm.sh", plan_file_caption="batch script (sbatch)"),
}
NAMES = tuple(TARGETS)
TargetName = Literal[NAMES]  # the manifest's compute.target


def module_of(name: str) -> str:
    return f"runner.targets.{name}.target"


ON_THIS_MACHINE = tuple(name for name, row in TARGETS.items() if row.on_this_machine)


def bare_here(name: str) -> bool:
    """The training is a process of an interpreter on this machine, in no container: tftrain can run
    that interpreter itself (probe it, give it an image-less environment)."""
    row = TARGETS[name]
    return row.on_this_machine and not row.containers


def docker_here(name: str) -> bool:
    """The training runs in a container of this machine's Docker daemon."""
    row = TARGETS[name]
    return row.on_this_machine and row.containers
