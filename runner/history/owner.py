"""Who owns a run: the tftrain process that runs it (host, pid, the pid's start time, the boot), and
whether this machine can tell that process has ended."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


# --- who owns a run -----------------------------------------------------------------------------
class Owner(NamedTuple):
    """The tftrain process that runs a run: a pid is reused, a pid with its start time is not."""

    host: str
    pid: int
    start: int | None  # clock ticks after boot (/proc/PID/stat, field 22)
    boot: str | None

    @classmethod
    def me(cls) -> Owner:
        return cls(_hostname(), os.getpid(), process_start(os.getpid()), boot_id())

    @classmethod
    def of(cls, owner: dict | None) -> Owner | None:
        """The owner a run.json names; None when it names none (records older than owners)."""
        if not (isinstance(owner, dict) and isinstance(owner.get("pid"), int) and isinstance(owner.get("host"), str)):
            return None
        return cls(owner["host"], owner["pid"], owner.get("start"), owner.get("boot"))

    def as_dict(self) -> dict:
        return self._asdict()

    def gone(self) -> bool:
        """True when this machine can tell the owner has ended; another host's runs are never judged."""
        if self.host != _hostname() or not Path("/proc/self/stat").exists():
            return False
        if self.boot and self.boot != boot_id():
            return True  # the machine rebooted since
        start = process_start(self.pid)
        return start is None or (self.start is not None and start != self.start)


def process_start(pid: int) -> int | None:
    """When a live process started (clock ticks after boot); None when there is none (or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the command name may hold spaces and ')'
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _hostname() -> str:
    """socket.gethostname() without importing socket (uname's node name is what it returns)."""
    return os.uname().nodename
