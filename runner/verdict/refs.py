"""One side of a verdict, from the reference a user gives: a run (its id, number or `latest`), a
registered version (NAME@vN, NAME@latest) or a release (release:NAME@vN|@latest).

A side is its kept evidence (None for a model made before tftrain kept any), the version's files
for re-evaluating it (a copy verified as `tftrain serve` and `models pull` verify one, or the run's
own model), and the point value of its primary metric (metrics.json's last value), shown beside an
inconclusive verdict. The copy is removed when the side's context ends.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import EvidenceError, NotFoundError
from runner.verdict.layout import EvidenceSet, read_set, summary_of

COPY_PREFIX = "tftrain-compare-"
REFS = "a run id (or number, or latest), NAME@vN, NAME@latest or release:NAME@vN|@latest"


@dataclass(frozen=True)
class PointValue:
    """A side's primary metric as metrics.json has it: one draw, no spread."""

    metric: str
    value: float
    goal: str  # maximize | minimize, as the manifest (or the metric's name) says


@dataclass(frozen=True)
class Side:
    label: str  # how the verdict names it: a run id, NAME@vN, a release's tag
    evidence: EvidenceSet | None  # None: it kept none (or none for this metric), `missing` says why
    model: Path | None  # the model to re-evaluate: a verified copy's model/, or the run's own
    point: PointValue | None
    run_dir: Path | None = None  # the run that made it, when it is on this machine
    manifest: dict | None = None  # that run's manifest (run.json's), for its evaluation: section
    missing: str | None = None


@contextmanager
def side_of(ref: str, home: Path, logger, settings=None, metric: str | None = None) -> Iterator[Side]:
    """REF as a Side; its verified copy (if any) is removed on the way out. NotFoundError (one line)
    for a REF that names nothing; EvidenceError for kept evidence that is damaged. `settings`
    (runner.settings) are needed for a release: REF only (GitHub's repository and token)."""
    from runner.serving.refs import RELEASE_PREFIX

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=COPY_PREFIX)))
        if ref.startswith(RELEASE_PREFIX):
            yield _release(ref, scratch, logger, settings, metric, stack)
        elif "@" in ref:
            yield _version(ref, scratch, home, metric)
        else:
            yield _run(ref, scratch, home, metric)


def _run(ref: str, scratch: Path, home: Path, metric: str | None) -> Side:
    from runner.history.record import RunRecord
    from runner.history.store import Store
    from runner.history.untrusted import read_json

    with Store(home) as store:
        try:
            run = store.run(ref)
        except NotFoundError:
            raise NotFoundError(
                f"{ref!r} is not a run here: use {REFS} (see `tftrain runs` and `tftrain models`)"
            ) from None
    try:
        record = RunRecord.read(run.run_dir / "run.json")
    except (OSError, ValueError) as exc:
        raise NotFoundError(
            f"run {run.run_id}: run.json cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    evidence, missing = _evidence(run.run_dir, run.run_id, metric)
    of = (record.seed or {}).get("of") if isinstance(record.seed, dict) else None
    if evidence is None and isinstance(of, str):  # one of an evaluation's other seeds: its run holds the evidence
        missing = (
            f"{run.run_id} is seed {record.seed.get('seed')} of run {of}, which keeps every seed's evidence: compare"
            f" {of}"
        )
    if record.model:  # the registered copy, verified, is what the verdict speaks of
        model = _checkout(record.model, scratch, home).path / "model"
    else:
        model = run.run_dir / "workdir" / str((record.manifest.get("model") or {}).get("path") or "outputs/model")
    try:
        summary = read_json(run.run_dir / "metrics.json")
    except (OSError, ValueError, RecursionError):
        summary = record.metrics.as_dict() if record.metrics else None
    return Side(
        run.run_id,
        evidence,
        model if model.exists() else None,
        point_of(summary, record.manifest),
        run.run_dir,
        record.manifest,
        missing,
    )


@dataclass(frozen=True)
class _Copy:
    path: Path
    info: dict


def _checkout(ref: str, scratch: Path, home: Path) -> _Copy:
    from runner.history.model_registry import Registry, checkout_version
    from runner.history.store import Store

    with Store(home) as store:
        model = Registry(store).resolve(ref)
        root = scratch / "version"
        checkout_version(model, root)  # every file checked against SHA256SUMS and version.json's extras
    return _Copy(root, {**model.info, "label": model.label})


def _version(ref: str, scratch: Path, home: Path, metric: str | None) -> Side:
    from runner.history.record import RunRecord
    from runner.history.store import Store

    copy = _checkout(ref, scratch, home)
    label = copy.info["label"]
    evidence, missing = _evidence(copy.path, label, metric)
    run_dir, manifest = None, None
    run_id = copy.info.get("run_id")
    if isinstance(run_id, str) and run_id:
        with Store(home) as store:
            try:
                run_dir = store.run(run_id).run_dir
                manifest = RunRecord.read(run_dir / "run.json").manifest
            except (NotFoundError, OSError, ValueError):
                run_dir, manifest = None, None  # made elsewhere (a copied home): re-evaluated where it runs, or not
    metrics = copy.info.get("metrics")
    return Side(
        label,
        evidence,
        copy.path / "model",
        point_of(metrics if isinstance(metrics, dict) else None, manifest),
        run_dir,
        manifest,
        missing,
    )


def _release(ref: str, scratch: Path, logger, settings, metric: str | None, stack: ExitStack) -> Side:
    from runner.github import workflow
    from runner.history.untrusted import read_json
    from runner.serving.refs import VerifiedAssets, checked_out

    if settings is None:
        raise AssertionError("a release: REF needs the settings (GitHub's repository and token)")
    stack.enter_context(workflow.github_errors())
    repo = workflow.client(settings.github).get_repo(settings.github.repository)
    (scratch / "release").mkdir()
    served = stack.enter_context(checked_out(ref, logger, lambda: (repo, settings), scratch / "release"))
    root = served.directory.root
    evidence, missing = _evidence(root, served.label, metric)
    if missing and summary_of(root) is None:
        missing = f"release {served.label} kept no per-example evidence (published before `evaluation:`, or without it)"
    release = repo.get_release(served.label)
    assets = {asset.name: asset for asset in release.get_assets()}
    summary = None
    if "metrics.json" in assets:  # beside the copy, not in it: `models verify` reads the copy as signed
        target = VerifiedAssets(release, assets, scratch / "metrics")(
            "metrics.json", scratch / "metrics" / "metrics.json", 1 << 20
        )
        try:
            summary = read_json(target)
        except (OSError, ValueError, RecursionError):
            summary = None
    return Side(served.label, evidence, root / "model", point_of(summary, None), None, None, missing)


def _evidence(directory: Path, label: str, metric: str | None) -> tuple[EvidenceSet | None, str | None]:
    """The kept set, or None and why: none kept, or kept for another metric (re-evaluation can
    still score this one). A damaged set is an EvidenceError."""
    summary = summary_of(directory)
    if summary is None:
        return None, f"{label} kept no per-example evidence"
    kept = summary.get("metric")
    if metric is not None and isinstance(kept, str) and kept and kept != metric:
        return None, f"{label}'s evidence scores {kept!r}, not {metric!r}"
    return read_set(directory, label, metric), None


def point_of(summary: dict | None, manifest: dict | None) -> PointValue | None:
    """The primary metric's last value of a metrics summary (metrics.json, a version's metrics), its
    goal from the manifest's metrics.goal (for the primary), else from its name; None when there is none."""
    import math

    from runner.manifest.fields import goal_of_name
    from runner.telemetry.summary import primary_metric

    if not isinstance(summary, dict):
        return None
    try:
        name, value = primary_metric(summary)
    except AttributeError:  # a metrics summary of another shape: no point value, not a failure
        return None
    if (
        not isinstance(name, str)
        or isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
    ):
        return None
    metrics = (manifest or {}).get("metrics")
    goal = metrics.get("goal") if isinstance(metrics, dict) and metrics.get("primary") == name else None
    return PointValue(name, float(value), goal if goal in ("maximize", "minimize") else goal_of_name(name))


def check_evidence(side: Side, role: str) -> EvidenceSet:
    """The side's evidence, or EvidenceError naming why it has none (the candidate must have some)."""
    if side.evidence is None:
        why = side.missing or f"{side.label} kept no per-example evidence"
        raise EvidenceError(f"the {role} {why}" + ("" if "compare " in why else " (evaluation: keeps it)"))
    return side.evidence
