"""SIGINT, SIGTERM and SIGHUP while a run or a sweep is in progress: they stop it, never kill tftrain."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def on_stop_signals(handler: Callable[[signal.Signals], None]) -> Iterator[None]:
    """While inside, each stop signal calls `handler(the signal)`; the previous handlers come back
    after. Off the main thread (a sweep's trial) nothing is installed: the sweep holds the signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: handler(signal.Signals(signum))) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
