"""Where a model's evaluation evidence is kept, and how a kept set is read back.

The same layout serves a run (runs/ID/evaluation/), a registered version
(models/NAME/vN/evaluation/, inside its SHA256SUMS, provenance and signature) and a release (its
assets `evaluation.json` and `evaluation-seed-N.jsonl`, in the release's SHA256SUMS):

    evaluation/evaluation.json   what the set is: metric, goal, fingerprint, one entry per seed
    evaluation/seed-0.jsonl      one row per example: {"id": "...", METRIC: value}
    evaluation/seed-1.jsonl      …

A kept set is hostile input like any per-example file (a release's assets, a copied home): the
summary is read bounded, the seed files only by the names it may hold, each through read_evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runner.errors import EvidenceError
from runner.serving.layout import (  # the names a release and a version share
    EVALUATION_DIR,
    EVALUATION_SUMMARY,
    MAX_SEEDS,
    SEED_FILE,
)
from runner.verdict.evidence import Evidence, read_evidence
from runner.verdict.stats import Goal

DIRECTORY = EVALUATION_DIR
SUMMARY = EVALUATION_SUMMARY


def seed_file(seed: int) -> str:
    return f"seed-{seed}.jsonl"


def write_seed(path: Path, evidence: Evidence) -> None:
    """One seed's evidence, normalised: JSON Lines of id and the metric, in the file's order."""
    metric = evidence.metric
    with path.open("w", encoding="utf-8") as out:
        for identifier, value in zip(evidence.ids, evidence.values.tolist()):
            out.write(json.dumps({"id": identifier, metric: value}) + "\n")


@dataclass(frozen=True)
class EvidenceSet:
    """One model's evidence: the metric, its goal, one Evidence per seed that finished."""

    label: str  # how the verdict names this side: a run id, NAME@vN, a release's tag
    metric: str
    goal: Goal
    seeds: tuple[Evidence, ...]
    summary: dict  # evaluation.json as written

    @property
    def fingerprint(self) -> str:
        return self.seeds[0].fingerprint

    @property
    def data_fingerprint(self) -> str | None:
        value = self.summary.get("data_fingerprint")
        return value if isinstance(value, str) else None


def summary_of(directory: Path) -> dict | None:
    """evaluation/evaluation.json of a run, version or release copy, or None where there is none (a
    model made before tftrain kept evidence). EvidenceError when it is there and damaged."""
    from runner.history.untrusted import BadRecord, read_json

    path = directory / DIRECTORY / SUMMARY
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, BadRecord, RecursionError) as exc:
        raise EvidenceError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(data, dict):
        raise EvidenceError(f"{path}: not a JSON object")
    return data


def read_set(directory: Path, label: str, metric: str | None = None) -> EvidenceSet | None:
    """The evidence kept under `directory`/evaluation, None where there is none. `metric`: the one
    to read (default: the set's own); EvidenceError when the set does not hold it."""
    summary = summary_of(directory)
    if summary is None:
        return None
    where = directory / DIRECTORY / SUMMARY
    kept = summary.get("metric")
    if not isinstance(kept, str) or not kept:
        raise EvidenceError(f"{where}: no metric")
    metric = metric or kept
    if metric != kept:
        raise EvidenceError(f"{label}'s evidence scores {kept!r}, not {metric!r} (evaluation.metric)")
    try:
        goal = Goal(summary.get("goal"))
    except ValueError:
        raise EvidenceError(f"{where}: goal is not maximize or minimize") from None
    entries = summary.get("seeds")
    if not isinstance(entries, list) or not entries:
        raise EvidenceError(f"{where}: no seeds")
    if len(entries) > MAX_SEEDS:
        raise EvidenceError(f"{where}: {len(entries)} seeds, over the {MAX_SEEDS} a set may hold")
    seeds = []
    for index, entry in enumerate(entries):
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not SEED_FILE.fullmatch(name):
            raise EvidenceError(f"{where}: seeds[{index}].file is not seed-N.jsonl")
        seeds.append(read_evidence(directory / DIRECTORY / name, metric, f"{label}: {DIRECTORY}/{name}"))
    return EvidenceSet(label, metric, goal, tuple(seeds), summary)
