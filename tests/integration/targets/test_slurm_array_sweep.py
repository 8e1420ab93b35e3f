"""A sweep on Slurm as array jobs, on the real two-node cluster: the trials that start together are
one array job (squeue shows the sweep's array, never a job per trial; `%2` its throttle), each task
its trial's own run, parameter and log, the best trial registered as before; early termination
cancels exactly its trial's task. And the array's script in bash: task i runs trial i alone."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from slurming import queued, show_job
from sweeping import SCRIPT, show, sweep_manifest

from runner.targets.slurm.array_jobs import ArrayEntry, array_script, split_env
from runner.targets.slurm.target import home_comment

pytestmark = pytest.mark.integration

ON_SLURM = 'user_managed: true\nmodel: {gate: "off"}\ncompute:\n  target: slurm\n'
TRACE = """\
import os, sys
print("params", " ".join(sys.argv[1:]), flush=True)
with open(os.environ["TRACE"], "a") as trace:
    trace.write(f"{os.environ['SLURM_ARRAY_JOB_ID']} {os.environ['SLURM_ARRAY_TASK_ID']} {os.environ['TFTRAIN_RUN_ID']}\\n")
"""


class Squeue:
    """Every line squeue shows of this home's jobs (its comment: the shared cluster runs other
    sessions' tftrain jobs too) while the sweep runs (`%i %j`), asked every 0.2 s."""

    def __init__(self, comment: str) -> None:
        self.comment = comment
        self.seen: list[list[str]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._ask, daemon=True)
        self.thread.start()

    def _ask(self) -> None:
        while not self.done.is_set():
            out = subprocess.run(
                ["squeue", "-h", "--me", "-o", "%i %j|%k"], capture_output=True, text=True, timeout=30
            ).stdout
            ours = [line.partition("|") for line in out.splitlines()]
            lines = [line for line, _, comment in ours if comment == self.comment and " tftrain-" in line]
            if lines:
                self.seen.append(lines)
            time.sleep(0.2)

    def stop(self) -> list[list[str]]:
        self.done.set()
        self.thread.join(35)
        return self.seen


def array_task(home: Path, run_id: str) -> tuple[str, str]:
    """(array job id, task index) of a trial's run, as it kept them."""
    text = (home / "runs" / run_id / "launch" / "array-task").read_text().strip()
    assert re.fullmatch(r"\d+_\d+", text), text
    array, _, index = text.partition("_")
    return array, index


def test_a_sweep_submits_its_trials_as_array_jobs(project, cli, home, tmp_path, slurm_cluster):
    trace = tmp_path / "trace"
    path = sweep_manifest(project, steps=4, pause=0.25, sampling="grid", trials=4, concurrent=2, script=TRACE + SCRIPT)
    path.write_text(path.read_text() + ON_SLURM + f"environment_variables:\n  TRACE: {trace}\n")
    squeue = Squeue(home_comment(home))
    try:
        result = cli("run", "-f", str(path), timeout=600)
    finally:
        seen = squeue.stop()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    document = show(cli)
    trials = document["trials"]
    assert len(trials) == 4 and all(t["status"] == "Completed" for t in trials), trials
    tasks = {t["number"]: array_task(home, t["run_id"]) for t in trials}
    assert tasks[0][0] == tasks[1][0] and {tasks[0][1], tasks[1][1]} == {"0", "1"}  # started together: one array
    assert len({array for array, _ in tasks.values()}) < 4
    for trial in trials:  # each task its own trial: its run id, its parameter, its log
        run = home / "runs" / trial["run_id"]
        array, index = tasks[trial["number"]]
        assert f"{array} {index} {trial['run_id']}" in trace.read_text().splitlines()
        log = (run / "workdir/logs/0.log").read_text()
        assert f"--lr {trial['params']['--lr']}" in log and "step 4 score" in log, log
        assert f"#SBATCH --job-name=tftrain-{trial['run_id']}" in (run / "launch/slurm.sh").read_text()
        assert not (run / "launch/batch.log").exists()  # followed, then removed as a job's is (logs/ keeps it masked)
    assert seen, "squeue never showed the sweep's jobs"
    for lines in seen:  # the sweep's array jobs, never a job per trial; at most two at once
        assert all(line.split()[1].startswith("tftrain-sweep-") for line in lines), lines
        assert len({line.split()[0].split("_")[0] for line in lines}) <= 2, lines
    shown = show_job(f"{tasks[0][0]}_0")
    assert "ArrayTaskThrottle=2" in shown or "%2" in shown, shown
    sacct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", tasks[0][0], "-o", "JobID,JobName,State"], capture_output=True, text=True
    )
    rows = [line.split("|") for line in sacct.stdout.splitlines() if line.strip()]
    assert {row[0] for row in rows} >= {f"{tasks[0][0]}_0", f"{tasks[0][0]}_1"}, sacct.stdout + sacct.stderr
    assert all(row[1].startswith("tftrain-sweep-") and row[2] == "COMPLETED" for row in rows), rows
    assert document["best"]["model_version"] == "demo@v1"  # registered as before
    assert queued("tftrain-sweep-") == []  # (another suite may run jobs of its own on the cluster)


def test_early_termination_cancels_its_trials_array_task(project, cli, home, slurm_cluster):
    extra = "  early_termination: {type: bandit, slack_amount: 0.5, evaluation_interval: 1, delay_evaluation: 1}\n"
    path = sweep_manifest(project, steps=60, pause=0.2, sampling="grid", trials=2, concurrent=2, extra=extra)
    text = path.read_text().replace("[0.01, 0.05, 0.1, 0.2]", "[0.2, 0.01]").replace("[16, 64]", "[16]")
    path.write_text(text.replace("  --pause: 0.2\n", "  --pause: 0.2\n  --slow-below: 0.1\n") + ON_SLURM)
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    trials = {t["params"]["--lr"]: t for t in show(cli)["trials"]}
    winner, loser = trials[0.2], trials[0.01]
    assert winner["status"] == "Completed"
    assert loser["status"] == "Canceled" and loser["early_terminated"] is True
    (array, lost), (same, won) = array_task(home, loser["run_id"]), array_task(home, winner["run_id"])
    assert array == same and lost != won  # one array job, two tasks

    def state(task: str) -> str:
        return subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", task, "-o", "State"], capture_output=True, text=True, timeout=30
        ).stdout.strip()

    # the loser's task stopped (its training died of the SIGTERM, or scancel ended it), the winner's ran on
    assert state(f"{array}_{lost}").split()[0] in ("CANCELLED", "FAILED"), state(f"{array}_{lost}")
    assert state(f"{array}_{won}") == "COMPLETED", state(f"{array}_{won}")
    assert "step 60 " in (home / "runs" / winner["run_id"] / "workdir/logs/0.log").read_text()
    log = (home / "runs" / loser["run_id"] / "workdir/logs/0.log").read_text()
    assert "step 60" not in log  # stopped early, by its own task's cancel
    assert queued("tftrain-sweep-") == []  # (another suite may run jobs of its own on the cluster)


def test_the_array_script_in_bash_runs_task_i_with_its_values_quoted(tmp_path):
    """Hostile values (quotes, $, newlines) reach the task as they are, and only task i's."""
    entries = []
    for n, value in enumerate(["a'b", "$(touch /tmp/x) \n `y`"]):
        launch = tmp_path / f"r{n}" / "launch"
        launch.mkdir(parents=True)
        (launch / "slurm.sh").write_text('printf "%s|%s" "$PWD" "$V"\n')
        entries.append(
            ArrayEntry(launch / "slurm.sh", launch, str(launch.parent), (), {"V": value, "SHARED": "1"}, frozenset())
        )
    common, own = split_env(entries)
    script = tmp_path / "array.sh"
    script.write_text(array_script(entries, own, "tftrain-sweep-x", tmp_path, 2))
    for n, value in enumerate(["a'b", "$(touch /tmp/x) \n `y`"]):
        done = subprocess.run(["bash", str(script)], env={"SLURM_ARRAY_TASK_ID": str(n), **common}, check=False)
        assert done.returncode == 0
        assert (tmp_path / f"r{n}" / "launch" / "batch.log").read_text() == f"{tmp_path / f'r{n}'}|{value}"
    assert subprocess.run(["bash", str(script)], env={"SLURM_ARRAY_TASK_ID": "7"}, check=False).returncode == 1
