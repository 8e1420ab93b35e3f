"""A finished run's model registered after the run itself ended: a sweep's best trial (when the
sweep ends) and an evaluation's seed 0 (when every seed has given its evidence). The model passes
the gate first; the files kept beside it (the gate's, the evaluation's evidence) are sealed with it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from runner.errors import NotFoundError
from runner.history.store import Store


class Gated(Protocol):
    """What the model gate's result gives registration (runner.serving.gate.GateResult)."""

    serving: object

    def files(self) -> dict[str, Path]: ...


def register_finished(
    home: Path,
    run_id: str,
    extra_info: dict,
    gate: Callable[[str], Gated | None] | None = None,
    extras: dict[str, Path] | None = None,
    warn: Callable[[str], None] | None = None,
) -> str | None:
    """The run's model as the next version of its model (NAME@vN), or None: no such run here (a
    shared study's trial that ran on another runner), register: false, or no model written.
    `extra_info` joins version.json; `extras`: more files kept beside model/, by their path there.
    GateError and RegistryError as registration raises them."""
    from runner.history.model_registry import Registry
    from runner.history.record import RunRecord
    from runner.history.sealing import seal_for
    from runner.history.secret_scan import secret_files, secret_values, warning
    from runner.settings import resolve

    store = Store(home)
    try:
        try:
            run_dir = store.run(run_id).run_dir
        except NotFoundError:
            return None
        record = RunRecord.read(run_dir / "run.json")
        spec = record.manifest.get("model", {})
        model_path = run_dir / "workdir" / spec.get("path", "outputs/model")
        if not model_path.exists():
            return None
        info = {
            "run_id": run_id,
            "metrics": record.metrics.as_dict() if record.metrics else {},
            "framework": spec.get("framework"),
            "framework_version": spec.get("framework_version") or record.manifest.get("framework_version"),
            "git": record.git,
            **extra_info,
        }
        result = gate(run_id) if gate else None
        if result is not None:
            info["serving"] = result.serving.as_json()
        seal = seal_for(run_dir, record.manifest, resolve(os.environ), os.environ)
        withheld = secret_files(model_path, secret_values(record.manifest.get("secrets") or []))
        for relative, secret in withheld.items():
            if warn is not None:
                warn(warning(str(spec.get("path")), relative, secret))
        kept = {**(result.files() if result else {}), **(extras or {})}
        version = Registry(store).register(
            record.name, model_path, run_id, info, kept or None, seal, frozenset(withheld)
        )
        store.update_run(run_id, model=version.label)
        return version.label
    finally:
        store.close()
