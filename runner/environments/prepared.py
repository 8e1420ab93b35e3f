"""The environment a run trains in, as its target prepared it (a virtualenv, an image, an
interpreter tftrain did not build), and how the model gate runs a process in it: what a target
hands to the gate and the lineage, so they need nothing of the targets themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.plan.model import HostMap


@dataclass(frozen=True, slots=True)
class Environment:
    python: str  # the interpreter, as the training sees it
    description: str
    reused: bool
    isolated: bool  # a virtualenv or image without tftrain: `import runner` needs a path
    image: str | None = None
    details: dict = field(default_factory=dict, hash=False)
    placement: HostMap | None = None  # the pool target's hosts for the launchers
    inventory: Callable[[], dict] | None = field(
        default=None, compare=False
    )  # more details, asked for once the training runs

    def described(self) -> dict:
        """Everything known of the environment, for manifest.lock.yml."""
        return {**self.details, **(self.inventory() if self.inventory else {})}


# (argv of the probe, its log, a time limit) → its exit status, None past the limit, or False where
# the run's environment is not on this machine
Probe = Callable[[list[str], Path, float], "int | None | bool"]
