"""A sweep's array task that never starts, on the real two-node cluster: held by an admin past
compute.queue_timeout_seconds, or canceled while PENDING (beside another pending task, Slurm drops
it from the array's record and nothing lists it any more; held first, it keeps a record of its own).
Its trial fails in one line naming the task and Slurm's reason, never Running; the other trial of the
same array runs to completion and the study records it, the sweep ends 0, and none of the array's
tasks is left in squeue.

The trials' tasks may start 6 s after they are submitted (--begin: Slurm's reason BeginTime), the
test holds or cancels task 1 before that, task 0 runs (the cluster is shared: only this home's
tasks count)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from slurming import ON_SLURM
from sweeping import show, sweep_manifest
from test_slurm_queue import ended
from test_slurm_stops import background
from watching import until

from runner.targets.slurm.target import home_comment

pytestmark = pytest.mark.integration

LATER = "  slurm:\n    extra_args: [--begin=now+6]\n"


def manifest(project, compute: str = "") -> Path:
    """Two trials (--lr 0.2 and 0.01) of ~4 s each that start together: one array job of two tasks."""
    path = sweep_manifest(project, steps=8, pause=0.5, sampling="grid", trials=2, concurrent=2)
    text = path.read_text().replace("[0.01, 0.05, 0.1, 0.2]", "[0.2, 0.01]").replace("[16, 64]", "[16]")
    path.write_text(text + ON_SLURM + compute + LATER)
    return path


def our_tasks(home: Path) -> list[tuple[str, str, str]]:
    """(A_i, state, reason) of every task of this home's arrays in squeue (the cluster is shared)."""
    out = subprocess.run(
        ["squeue", "-h", "--me", "-r", "-o", "%i|%T|%r|%k"], capture_output=True, text=True, timeout=30
    ).stdout
    rows = [line.split("|") for line in out.splitlines()]
    return [(row[0], row[1], row[2]) for row in rows if len(row) == 4 and row[3] == home_comment(home)]


def waiting_task(home: Path) -> str:
    """Task 1 of this home's array, once squeue shows it waiting for its begin time."""
    found: list[str] = []

    def waiting() -> bool:
        found[:] = [task for task, state, reason in our_tasks(home) if task.endswith("_1") and reason == "BeginTime"]
        return bool(found)

    until(waiting, "the array's task 1 pending (BeginTime)", timeout=60)
    return found[0]


def the_trials(cli, task: str, home: Path) -> tuple[dict, dict]:
    """(the trial of the task that never started, the other), as the study records them."""
    trials = show(cli)["trials"]
    assert len(trials) == 2, trials
    mine = [t for t in trials if (home / "runs" / t["run_id"] / "launch/array-task").read_text().strip() == task]
    assert len(mine) == 1, trials
    return mine[0], next(t for t in trials if t is not mine[0])


def record(home: Path, run_id: str) -> tuple[str | None, list[str]]:
    """(the run's message, its phases) as its record keeps them."""
    run = json.loads((home / "runs" / run_id / "run.json").read_text())
    return run["message"], [phase["phase"] for phase in run["phases"]]


def assert_other_completed(other: dict, home: Path) -> None:
    assert other["status"] == "Completed", other
    assert "step 8 score" in (home / "runs" / other["run_id"] / "workdir/logs/0.log").read_text()


def test_an_array_task_held_past_the_queue_timeout_fails_its_trial_alone(project, cli, home, slurm_cluster):
    path = manifest(project, "  queue_timeout_seconds: 30\n")
    process = background(path)
    with ended(process, cli):
        task = waiting_task(home)
        subprocess.run(["scontrol", "hold", task], check=True, timeout=30)
        out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out[-3000:]  # the other trial completed: the sweep did
    held, other = the_trials(cli, task, home)
    assert_other_completed(other, home)
    assert held["status"] == "Failed", held
    line = (
        f"compute.queue_timeout_seconds (30s) passed and Slurm job {task} is still PENDING (JobHeldAdmin); it was"
        " canceled"
    )
    assert f"trial {held['number']} ({held['run_id']}): Failed ({line})" in out, out[-3000:]
    assert "Traceback" not in out
    assert record(home, held["run_id"]) == (line, ["Preparing", "Queued", "PostProcessing", "Failed"])  # never ran
    assert (home / "runs" / held["run_id"] / "launch/slurm.sh").exists()  # the trial's record and files are kept
    assert our_tasks(home) == []  # the held task was canceled, the other ended


# Slurm drops a task scanceled beside others still pending from its array's record: nothing lists it any more
DROPPED = (
    r"Slurm no longer lists job {task} \(last seen PENDING \((BeginTime|no reason given)\)\): it never started"
    r" \(a scancel while it was pending, or Slurm forgot it\)"
)
# a held task has a record of its own, which keeps the task's last reason once it is scanceled
CANCELED = (
    r"Slurm job {task} was canceled while PENDING \(JobHeldAdmin\), before it started \(scancel from outside tftrain\)"
)


@pytest.mark.parametrize(
    "commands, words",
    [([["scancel"]], DROPPED), ([["scontrol", "hold"], ["scancel"]], CANCELED)],
    ids=["scancel", "held"],
)
def test_an_array_task_canceled_while_pending_fails_its_trial_alone(project, cli, home, slurm_cluster, commands, words):
    path = manifest(project)
    process = background(path)
    with ended(process, cli):
        task = waiting_task(home)
        for command in commands:
            subprocess.run([*command, task], check=True, timeout=30)
        out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out[-3000:]
    canceled, other = the_trials(cli, task, home)
    assert_other_completed(other, home)
    assert canceled["status"] == "Failed", canceled
    line = words.format(task=task)
    assert re.search(rf"trial \d \({canceled['run_id']}\): Failed \({line}\)\n", out), out[-3000:]
    message, phases = record(home, canceled["run_id"])
    assert re.fullmatch(line, message or ""), message
    assert "Traceback" not in out
    assert phases == ["Preparing", "Queued", "PostProcessing", "Failed"]  # it never ran
    (log,) = home.glob(f"sweeps/*/trials/{canceled['number']}.log")
    assert "no usable record" not in log.read_text()  # a task that never ran: no wait for its accounting
    assert (home / "runs" / canceled["run_id"] / "launch/slurm.sh").exists()
    assert our_tasks(home) == []
