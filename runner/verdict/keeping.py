"""The seeds' evidence gathered into the run (seed 0's directory, evaluation/), each file read as
hostile input: a seed whose file is missing or damaged is left out with one warning naming the file
and row, never the run's failure (its model is still registered; the verdict counts what is kept)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from runner.errors import EvidenceError
from runner.history.checksums import format_sums, sha256_file, walk
from runner.history.regular import EntryKind, kind_of
from runner.manifest.evaluation import EvaluationSpec
from runner.verdict.evidence import Evidence, read_evidence
from runner.verdict.layout import DIRECTORY, SUMMARY, seed_file, write_seed


def data_fingerprint(path: Path) -> str | None:
    """sha256 of the evaluation data (`evaluation.data`): a file's own, a directory's over the
    SHA256SUMS of its regular files; None where there is nothing regular to hash."""
    kind = kind_of(path)
    if kind is EntryKind.FILE:
        return sha256_file(path)
    if kind is EntryKind.DIRECTORY:
        sums = {entry.name: sha256_file(entry.path) for entry in walk(path) if entry.kind is EntryKind.FILE}
        return hashlib.sha256(format_sums(sums).encode()).hexdigest() if sums else None
    return None


def keep_evidence(
    spec: EvaluationSpec,
    run_dir: Path,
    seeds: list[tuple[int, str | None, Path | None, str]],
    warn: Callable[[str], None],
) -> dict:
    """`seeds`: (seed, run id, its workdir when it completed, its status) for every seed asked.
    Writes evaluation/seed-N.jsonl (normalised) and evaluation/evaluation.json into `run_dir`;
    returns evaluation.json's content."""
    directory = run_dir / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    kept, failed, fingerprints = [], [], set()
    for seed, run_id, workdir, status in seeds:
        if workdir is None:
            failed.append({"seed": seed, "run_id": run_id, "status": status})
            continue
        try:
            evidence = read_evidence(workdir / spec.per_example, spec.metric, f"seed {seed}: {spec.per_example}")
        except EvidenceError as exc:
            warn(f"{exc}: seed {seed} is left out of the verdict")
            failed.append({"seed": seed, "run_id": run_id, "status": status, "evidence": str(exc)})
            continue
        write_seed(directory / seed_file(seed), evidence)
        fingerprints.add(evidence.fingerprint)
        kept.append(_entry(seed, run_id, evidence))
    shares = [entry.pop("binary") for entry in kept]  # every value 0 or 1: the metric is a share, read in points
    if len(fingerprints) > 1:
        warn(
            "the seeds scored different evaluation sets (their ids differ): the verdict compares the examples they"
            " share"
        )
    data = None
    if spec.data is not None and seeds and seeds[0][2] is not None:
        data = data_fingerprint(seeds[0][2] / spec.data)
        if data is None:
            warn(
                f"evaluation.data {spec.data!r} is not a file or directory of the run: the set's fingerprint is its ids"
                " alone"
            )
    summary = {
        "metric": spec.metric,
        "goal": spec.goal_for(),
        "fingerprint": next(iter(fingerprints)) if len(fingerprints) == 1 else None,
        "data_fingerprint": data,
        "examples": max((entry["examples"] for entry in kept), default=0),
        "binary": bool(shares) and all(shares),
        "asked": len(seeds),
        "seeds": kept,
        "failed": failed,
    }
    (directory / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _entry(seed: int, run_id: str | None, evidence: Evidence) -> dict:
    binary = bool(((evidence.values == 0) | (evidence.values == 1)).all())
    return {
        "seed": seed,
        "run_id": run_id,
        "file": seed_file(seed),
        "mean": float(evidence.values.mean()),
        "examples": len(evidence.ids),
        "binary": binary,
    }


def version_extras(run_dir: Path, summary: dict) -> dict[str, Path]:
    """The evidence as files kept beside the registered model (sealed and signed with it)."""
    directory = run_dir / DIRECTORY
    files = {f"{DIRECTORY}/{SUMMARY}": directory / SUMMARY}
    for entry in summary["seeds"]:
        files[f"{DIRECTORY}/{entry['file']}"] = directory / entry["file"]
    return files
