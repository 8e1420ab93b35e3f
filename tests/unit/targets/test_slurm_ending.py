"""A job whose every task has exited is let end by itself before any scancel: a scancel in the
moment between the last task's exit and the batch script's end made Slurm's record of a training
that completed say CANCELLED (sacct's State, seen on the real cluster under load)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from types import SimpleNamespace

from runner.settings import LoggerSettings
from runner.targets.slurm import watch as watch_module
from runner.targets.slurm.jobs import JobInfo, JobState
from runner.targets.slurm.watch import JobWatch
from runner.telemetry.logger import Logger


class Cluster:
    """scontrol's answers in turn (the last one again after), and the scancels sent."""

    def __init__(self, monkeypatch, *states: JobState) -> None:
        self.states, self.canceled = list(states), []
        monkeypatch.setattr(watch_module, "STATE_EVERY", 0.01)
        monkeypatch.setattr(watch_module.jobs, "job_info", self.info)
        monkeypatch.setattr(watch_module.jobs, "cancel", self.cancel)

    def info(self, job_id, jobcomp) -> JobInfo:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return JobInfo(state, "", 0, 0, None)

    def cancel(self, job_id: str, signal_name: str | None = None) -> None:
        self.canceled.append(signal_name)
        self.states = [JobState.CANCELLED]


def watch_of(job_dir: Path, exited: bool) -> JobWatch:
    plan = SimpleNamespace(tasks=[SimpleNamespace(rank=0)], driver=None)
    if exited:
        (job_dir / "exit").mkdir()
        (job_dir / "exit" / "0").write_text("0\n")
    return JobWatch("7", job_dir, plan, False, Logger(io.StringIO(), settings=LoggerSettings()))


def test_a_job_whose_tasks_all_exited_ends_by_itself(monkeypatch, tmp_path):
    cluster = Cluster(monkeypatch, JobState.RUNNING, JobState.RUNNING, JobState.COMPLETING, JobState.COMPLETED)
    watch = watch_of(tmp_path, exited=True)
    watch.stop(5.0, threading.Event())
    assert cluster.canceled == [] and not watch.canceled  # Slurm's COMPLETED is the tasks' own


def test_one_that_does_not_end_is_canceled_after_a_while(monkeypatch, tmp_path):
    monkeypatch.setattr(watch_module, "ENDING_SECONDS", 0.2)
    cluster = Cluster(monkeypatch, JobState.RUNNING)
    watch = watch_of(tmp_path, exited=True)
    watch.stop(5.0, threading.Event())
    assert cluster.canceled == [None] and watch.canceled  # no SIGTERM first: no task is left to end well


def test_a_task_still_running_is_stopped_as_before(monkeypatch, tmp_path):
    cluster = Cluster(monkeypatch, JobState.RUNNING)
    watch = watch_of(tmp_path, exited=False)
    watch.stop(0.05, threading.Event())
    assert cluster.canceled == ["TERM", None] and watch.canceled
