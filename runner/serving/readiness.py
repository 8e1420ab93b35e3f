"""The one readiness wait of a model server, whoever started it (`tftrain serve` and the replay's
processes, deploy's smoke-test container): ask until it answers ready, it ends, or the time is up.
Each caller says what "ready" and "ended" mean for its server, and what each outcome costs."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable


class Waited(enum.Enum):
    READY = "ready"
    ENDED = "ended"  # the server stopped before it was ready
    TIMED_OUT = "timed out"


def wait_ready(
    ready: Callable[[], bool],
    ended: Callable[[], bool],
    timeout: float,
    every: float = 0.2,
    ask: Callable[[float], bool] | None = None,
) -> Waited:
    """Call `ready()` every `every` seconds until it is true (asked first: a server already up is
    never looked at further), `ended()` is, or `timeout` seconds passed. `ask(seconds)`: waits up to `seconds` for a
    reason to ask at all (the server's port known);
    by default there always is one."""
    deadline = time.monotonic() + timeout
    while True:
        if (ask is None or ask(every)) and ready():
            return Waited.READY
        if ended():
            return Waited.ENDED
        if time.monotonic() > deadline:
            return Waited.TIMED_OUT
        time.sleep(every)
