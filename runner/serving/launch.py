"""Start `python -m runner.serving.probe` in a process of its own on this machine: its output
into a log, a time limit, its whole process group gone afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

PROBE_MODULE = "runner.serving.probe"


def run_probe(python: str, args: list[str], pythonpath: Path | None, log: Path, timeout: float) -> int | None:
    """The probe's exit status; None when it ran past `timeout` (it is killed)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [python, "-m", PROBE_MODULE, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # what it started goes with it
            except ProcessLookupError:
                pass
            process.wait()
