"""What holds a run's processes on this machine, whatever its target: tftrain a child subreaper
(Linux), and the name of the run's cgroup (the local backend creates it, runner/targets/local/;
`reconcile` finds a lost run's by it). The pipeline calls `contain_run` before anything of the run
starts; nothing outside runner/targets/ needs a backend for it."""

from __future__ import annotations

import ctypes
import hashlib
import re
from pathlib import Path

from runner.targets.base import RunControl

PR_SET_CHILD_SUBREAPER = 36


def contain_run(control: RunControl, run_id: str, home: Path) -> None:
    """The run's cgroup name on `control`; tftrain adopts what the run's processes orphan."""
    control.cgroup = run_cgroup_name(run_id, home)
    become_subreaper()


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run_cgroup_name(run_id: str, home: Path) -> str:
    """`demo-1.3fa9c2e0d1b4`: the run id, and a digest of its TFTRAIN_HOME (every home has a demo-1)."""
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:12]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", run_id) + "." + digest
