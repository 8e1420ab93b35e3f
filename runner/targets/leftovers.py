"""Runs whose tftrain is gone: `reconcile` marks them lost in the history (Store.mark_lost) and
removes what they left running: the run's processes (its cgroup) and what its target says it left
(Target.reap_lost: the docker target's containers, which outlive tftrain by design, a Slurm job). A retry's next attempt
must not train beside them: both would write the one checkpoint
directory. Opening the history never does this (storage does not act): the commands that judge a
run's state call `reconcile` first — run (and a retry's next attempt), runs, logs, metrics, doctor,
models register, publish and the PR comment — through open_history, which always tells the user."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import FatalError

if TYPE_CHECKING:
    from runner.history.store import Store


@contextmanager
def open_history(
    home: Path, notify: Callable[[str], None], set_aside: str | None = None, reading: bool = False
) -> Iterator[Store]:
    """The one door to the history for a command that judges a run's state: `home`'s Store, its lost
    runs reconciled first, each told to `notify` in one line (the run marked Failed, what it left
    removed). `set_aside`: doctor's; `reading`: a command that only reads (a home with no history
    is read as empty, nothing made): runner.history.store.Store."""
    from runner.history.store import Store

    with Store(home, notify=notify, set_aside=set_aside, reading=reading) as store:
        reconcile(store)
        yield store


def reconcile(store: Store) -> list[str]:
    """Mark Failed the runs of `store` whose tftrain is gone, remove what each left running, and
    tell `store.notify` about each. Returns their ids."""
    lost = store.mark_lost()
    for run in lost:
        reaped = reap_lost_run(run.run_id, store.home, run.manifest)
        store.notify(f"run {run.run_id} marked Failed ({run.message})" + (f"; {reaped}" if reaped else ""))
    return [run.run_id for run in lost]


def reap_lost_run(run_id: str, home: Path, manifest_json: str | None) -> str | None:
    """Kill and remove what is left: the run's processes on this machine, then what its target left
    (Target.reap_lost); a note of what that was (None: nothing)."""
    from runner.targets.factory import target_for

    notes = []
    killed = _processes(run_id, home)
    if killed:
        notes.append(f"killed {killed} leftover processes")
    name = _target(manifest_json) if manifest_json else None
    if name is not None:
        try:
            target = target_for(name)
        except FatalError:  # a target this version of tftrain does not have
            target = None
        reaped = target.reap_lost(run_id, home) if target is not None else None
        if reaped:
            notes.append(reaped)
    return "; ".join(notes) or None


def _processes(run_id: str, home: Path) -> int:
    from runner.targets.local.processes import reap_run

    return reap_run(run_id, home) or 0


def _target(manifest_json: str) -> str | None:
    from runner.manifest import effective_target, stored_manifest

    try:
        return effective_target(stored_manifest(manifest_json))
    except ValueError:  # a manifest the history cannot read: nothing to judge by
        return None
