"""Runs whose tftrain is gone: `reconcile` marks them lost in the history (Store.mark_lost) and
removes what they left running: the local target's processes (the run's cgroup) and the docker
target's containers on this machine's daemon, which outlive tftrain by design (a container is not
its child). A retry's next attempt must not train beside them: both would write the one checkpoint
directory. Opening the history never does this (storage does not act): the commands that judge a
run's state call `reconcile` first — run (and a retry's next attempt), runs, logs, metrics, doctor,
models register, publish and the PR comment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.history.store import Store


def reconcile(store: Store) -> list[str]:
    """Mark Failed the runs of `store` whose tftrain is gone, remove what each left running, and
    tell `store.notify` about each. Returns their ids."""
    lost = store.mark_lost()
    for run in lost:
        reaped = reap_lost_run(run.run_id, store.home, run.manifest)
        store.notify(f"run {run.run_id} marked Failed ({run.message})" + (f"; {reaped}" if reaped else ""))
    return [run.run_id for run in lost]


def reap_lost_run(run_id: str, home: Path, manifest_json: str | None) -> str | None:
    """Kill and remove what is left; a note of what that was (None: nothing)."""
    notes = []
    killed = _processes(run_id, home)
    if killed:
        notes.append(f"killed {killed} leftover processes")
    if manifest_json and _target(manifest_json) == "docker":
        removed = _containers(run_id)
        if removed:
            notes.append(f"removed {removed} container" + ("s" if removed > 1 else "") + " it left running")
    if manifest_json and _target(manifest_json) == "slurm":
        canceled = _slurm_jobs(run_id, home)
        if canceled:
            notes.append(f"canceled Slurm job {', '.join(canceled)}")
    return "; ".join(notes) or None


def _processes(run_id: str, home: Path) -> int:
    from runner.targets.local.processes import reap_run

    return reap_run(run_id, home) or 0


def _slurm_jobs(run_id: str, home: Path) -> list[str]:
    """scancel the run's jobs still in Slurm's queue: its name and this home's comment (never another's)."""
    from runner.errors import FatalError
    from runner.targets.slurm import jobs
    from runner.targets.slurm.target import home_comment

    try:
        found = jobs.jobs_named(f"tftrain-{run_id}", home_comment(home))
        for job_id in found:
            jobs.cancel(job_id)
    except FatalError:  # slurmctld not answering: the next command tries again
        return []
    return found


def _target(manifest_json: str) -> str | None:
    from runner.manifest import effective_target, stored_manifest

    try:
        return effective_target(stored_manifest(manifest_json))
    except ValueError:  # a manifest the history cannot read: nothing to judge by
        return None


def _containers(run_id: str) -> int:
    """Force-remove the run's containers (SIGKILL: a lost run has no grace to give); 0 when no
    daemon answers (docker not here, or another machine's)."""
    from runner.environments import docker_client
    from runner.targets.container import LABEL_RUN

    try:
        client = docker_client()
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    except Exception:  # DockerError (no daemon), ImportError (no docker SDK), the daemon's errors
        return 0
    removed = 0
    for container in containers:
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # gone meanwhile
            pass
    return removed
