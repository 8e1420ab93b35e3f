"""The targets, named once. The manifest's `compute.target`, `--target` and the factory ask this
catalog; adding a target is one folder (runner/targets/NAME/target.py) and one row here, or, outside
tftrain, a package that registers its row (`register`) from an entry point of the group
`tftrain.targets` (see docs/adding-a-target.md).

Light on purpose: the manifest and the CLI import it at start-up, and nothing here imports a backend
(runner.targets.factory does, for the one target a run asks for). Entry points are read only when a
name is not a built-in target's (every installed distribution's metadata costs ~15 ms).
"""

from __future__ import annotations

import re
from typing import NamedTuple

ENTRY_POINTS = "tftrain.targets"
NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class TargetRow(NamedTuple):
    """What the rest of tftrain may know of a target without importing it."""

    cls: str  # the class in runner/targets/NAME/target.py
    containers: bool  # runs in the training image, so `use_docker: true` goes with it
    on_this_machine: bool  # the training uses this machine's CPUs, GPUs and run directory (checkpoint sync reads it)
    # the module in runner/targets/NAME/ behind `tftrain NAME` (factory.target_command), if any
    command: str | None = None
    # it may know its prices without compute.cost (the pool file's cost:): Target.listed_prices
    own_prices: bool = False
    # the GitHub runner only dispatches (its hosts or cluster train): the label such a runner has
    runner_label: str | None = None
    plan_file: str | None = None  # the file of its plan `tftrain plan` prints (what the target submits)
    # printed under the plan's description with this caption; None: it is the plan, printed alone
    plan_file_caption: str | None = None
    module: str | None = None  # the module holding `cls`; None: runner.targets.NAME.target (a plugin names its own)
    # its scheduler's accounting bills each job (compute.cost.from: slurm: Allocation.billing)
    bills: bool = False


# The order is the manifest schema's and --target's
TARGETS: dict[str, TargetRow] = {
    "local": TargetRow("LocalTarget", containers=False, on_this_machine=True),
    "docker": TargetRow("DockerTarget", containers=True, on_this_machine=True),
    "pool": TargetRow(
        "PoolTarget",
        containers=True,
        on_this_machine=False,
        command="survey",
        own_prices=True,
        runner_label="tftrain-pool",
    ),
    "kubernetes": TargetRow("KubernetesTarget", containers=True, on_this_machine=False, plan_file="kubernetes.yaml"),
    "slurm": TargetRow(
        "SlurmTarget",
        containers=False,
        on_this_machine=False,
        runner_label="slurm",  # a login node
        plan_file="slurm.sh",
        plan_file_caption="batch script (sbatch)",
        bills=True,
    ),
}
BUILT_IN = tuple(TARGETS)  # the manifest schema's enum (a plugin's target is valid all the same)
_plugins_read = False


def register(name: str, row: TargetRow) -> None:
    """Add a target (a plugin calls this from its `tftrain.targets` entry point); ValueError for a
    name that is not one (lowercase, digits, - and _) or is taken by another row."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"target name {name!r}: lowercase letters, digits, '-' and '_', starting with a letter")
    if not isinstance(row, TargetRow):
        raise ValueError(f"target {name}: register a runner.shared.catalog.TargetRow, not {type(row).__name__}")
    if TARGETS.get(name, row) != row:
        raise ValueError(f"target {name}: already registered")
    TARGETS[name] = row


def row_of(name: str) -> TargetRow | None:
    """The row of target `name`, plugins read first when it is no built-in one; None: no such target."""
    if name not in TARGETS:
        _read_plugins()
    return TARGETS.get(name)


def names() -> tuple[str, ...]:
    """Every target, the plugins' too."""
    _read_plugins()
    return tuple(TARGETS)


def _read_plugins() -> None:
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    from importlib.metadata import entry_points

    from runner.errors import UnsupportedError

    for point in entry_points(group=ENTRY_POINTS):
        try:
            made = point.load()
            if isinstance(made, TargetRow):
                register(point.name, made)
            else:
                made()
        except Exception as exc:  # noqa: BLE001 — someone else's code: one line naming it
            raise UnsupportedError(f"target plugin {point.name} ({point.value}): {type(exc).__name__}: {exc}") from None


def module_of(name: str) -> str:
    row = row_of(name)
    return row.module if row is not None and row.module else f"runner.targets.{name}.target"


def on_this_machine(name: str) -> bool:
    """The training uses this machine's CPUs, GPUs and run directory."""
    row = row_of(name)
    return row is not None and row.on_this_machine


def on_this_machine_names() -> tuple[str, ...]:
    """Every target whose training uses this machine, the plugins' too."""
    return tuple(name for name in names() if TARGETS[name].on_this_machine)


def bare_here(name: str) -> bool:
    """The training is a process of an interpreter on this machine, in no container: tftrain can run
    that interpreter itself (probe it, give it an image-less environment)."""
    row = row_of(name)
    return row is not None and row.on_this_machine and not row.containers


def docker_here(name: str) -> bool:
    """The training runs in a container of this machine's Docker daemon."""
    row = row_of(name)
    return row is not None and row.on_this_machine and row.containers
