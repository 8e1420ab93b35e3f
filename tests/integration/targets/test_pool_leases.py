"""Pool leases held by a process that died expire."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from builders import hosts, leases_at
from conftest import REPO

from runner.targets.pool.schedule import Demand, Request, place


def test_a_dead_holders_leases_expire(tmp_path):
    pool = hosts(("a", 1, 1))
    request = Request((Demand("main 0", gpus=1),))
    holder = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""\
            from pathlib import Path
            from runner.targets.pool.leases import Leases
            from runner.targets.pool.schedule import Capacity, Demand, Request, place
            leases = Leases(Path({str(tmp_path / "state")!r}), 60)
            attempt = leases.try_place("dead-job", [Capacity("a", 1, 1)], lambda held: place(Request((Demand("main 0", gpus=1),)), held))
            print(attempt.placement.placed)
            """),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert holder.stdout.strip() == "True"  # it ended without releasing: its process is gone
    assert leases_at(tmp_path).try_place("job", pool, lambda held: place(request, held)).placement.placed
