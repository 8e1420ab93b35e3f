"""What integration tests look at while a run goes on: a process alive, a line appearing in a log,
a run's status in the history, containers left over."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def run_status(home: Path, run_id: str) -> str:
    with sqlite3.connect(home / "tftrain.db") as db:
        return db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]


def wait_for(path: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}")


def until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout}s")


def leftover_containers(client, run_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"tftrain.run-id={run_id}"})
