"""Homes with runs, versions and releases that kept evaluation evidence, for the verdict's tests:
the layout runner.verdict.layout reads (evaluation/evaluation.json and seed-N.jsonl), written as the
seeds driver writes it, and versions registered with the evidence as their extras."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from runner.history.model_registry import Registry
from runner.history.states import RunStatus
from runner.history.store import Store
from runner.verdict.evidence import Evidence
from runner.verdict.layout import DIRECTORY, SUMMARY, seed_file, write_seed


def scores(rate: float, examples: int, seeds: int, seed: int, prefix: str = "x") -> list[dict[str, float]]:
    """`seeds` seeds' 0/1 scores of `examples` examples (ids PREFIX0, PREFIX1, …), correct with probability `rate`."""
    rng = np.random.default_rng(seed)
    return [{f"{prefix}{i}": float(v) for i, v in enumerate(rng.random(examples) < rate)} for _ in range(seeds)]


def keep_evidence(
    directory: Path,
    seeds: list[dict[str, float]],
    metric: str = "correct",
    goal: str = "maximize",
    data_fingerprint: str | None = None,
) -> dict[str, Path]:
    """evaluation/ under `directory`; returns its files by their path in a version (registration's extras)."""
    kept = directory / DIRECTORY
    kept.mkdir(parents=True, exist_ok=True)
    entries, files = [], {}
    for number, rows in enumerate(seeds):
        evidence = Evidence(seed_file(number), metric, tuple(rows), np.array(list(rows.values()), dtype=float))
        write_seed(kept / seed_file(number), evidence)
        entries.append(
            {"seed": number, "run_id": f"r{number}", "file": seed_file(number), "mean": float(evidence.values.mean())}
        )
        files[f"{DIRECTORY}/{seed_file(number)}"] = kept / seed_file(number)
    ids = sorted(seeds[0]) if seeds else []
    summary = {
        "metric": metric,
        "goal": goal,
        "fingerprint": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        "data_fingerprint": data_fingerprint,
        "examples": len(ids),
        "asked": len(seeds),
        "seeds": entries,
        "failed": [],
    }
    (kept / SUMMARY).write_text(json.dumps(summary))
    files[f"{DIRECTORY}/{SUMMARY}"] = kept / SUMMARY
    return files


def finished_run(
    home: Path,
    name: str = "demo",
    manifest: dict | None = None,
    seeds: list[dict[str, float]] | None = None,
    primary: float | None = None,
    register: bool = False,
    **evidence,
) -> str:
    """A completed run of `name` with a model in workdir/outputs/model, metrics.json (primary `accuracy`),
    its evidence (when `seeds`), and, with `register`, its model registered with the evidence as extras."""
    manifest = {"name": name, "entry_script": "train.py", "model": {"path": "outputs/model"}, **(manifest or {})}
    with Store(home) as store:
        run_id = store.new_run(name, json.dumps(manifest))
        run_dir = home / "runs" / run_id
        model = run_dir / "workdir" / "outputs" / "model"
        model.mkdir(parents=True)
        (model / "saved_model.pb").write_bytes(f"graph of {run_id}".encode())
        metrics = (
            {"primary": "accuracy", "metrics": {"accuracy": {"last": primary, "best": primary}}}
            if primary is not None
            else {}
        )
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
        extras = keep_evidence(run_dir, seeds, **evidence) if seeds else None
        store.finish(run_id, RunStatus.COMPLETED, 0, None)
        if register:
            info = {"run_id": run_id, "metrics": metrics}
            version = Registry(store).register(name, model, run_id, info, extras)
            store.update_run(run_id, model=version.label)
    return run_id
