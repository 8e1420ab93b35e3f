"""The files a model version is published with: the model, its metrics, logs, the resolved
manifest, a model card, a loss curve, and SHA256SUMS over all of them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import runner
from runner.errors import PublishError, SignatureError
from runner.history.checksums import Entry, EntryKind, copy_file, format_sums, read_sums, sha256_file, walk
from runner.history.packing import pack
from runner.history.rundir import RunPaths
from runner.history.untrusted import BadRecord, optional_mapping, read_json, read_yaml
from runner.history.usage import usage_from, usage_of
from runner.manifest.model import Manifest
from runner.serving.layout import RELEASE_ASSETS
from runner.serving.scoring.release import SCORING_ASSET, pack_scoring
from runner.storage.s3 import S3Target, pointer_text, upload
from runner.telemetry.point import iter_series
from runner.telemetry.report import metric_rows
from runner.telemetry.summary import sampled
from runner.telemetry.usage_report import change_line, usage_markdown
from runner.templates import render

SUMS = "SHA256SUMS"
# the gate's files in the run's serving/ → their release assets (tftrain serve reads them back)
SERVING_ASSETS = {Path(inside).name: asset for asset, inside in RELEASE_ASSETS.items()}


def build_assets(
    manifest: Manifest,
    paths: RunPaths,
    record: dict,
    version: int,
    directory: Path,
    s3: S3Target | None = None,
    run_url: str | None = None,
    download_url: str | None = None,
    previous: tuple[str, dict, dict | None] | None = None,
) -> list[Path]:
    """Write the assets into `directory` (anew) and return them, SHA256SUMS last. A model that goes
    to S3 is uploaded here and replaced by its pointer, model.s3.json. `run_url`: the workflow run
    the model card links to."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    model = paths.workdir / manifest.model.path
    archive = directory / "model.tar.gz"
    withheld = _withheld(manifest, paths, record, model)
    digests = {archive.name: pack(model, archive, withheld)}  # hashed as it is packed: never read again
    if s3 is not None and s3.offload(archive.stat().st_size):
        pointer = upload(s3, archive, f"{manifest.name}/v{version}/model.tar.gz", digests.pop(archive.name))
        (directory / "model.s3.json").write_text(pointer_text(pointer))
        archive.unlink()
    digests["logs.tar.gz"] = pack(paths.logs, directory / "logs.tar.gz")
    shutil.copy(paths.metrics_summary, directory / "metrics.json")
    shutil.copy(paths.metrics, directory / "metrics.jsonl")
    shutil.copy(paths.lock, directory / "manifest.lock.yml")
    if isinstance(record.get("usage"), dict):  # what the training used and cost: the next release's comparison reads it
        (directory / "usage.json").write_text(json.dumps(record["usage"], indent=2) + "\n")
    for source, asset in SERVING_ASSETS.items():  # what the model gate found, and model.onnx
        if (paths.serving / source).is_file():
            shutil.copy(paths.serving / source, directory / asset)
    if (
        scoring := pack_scoring(paths.serving, directory / SCORING_ASSET)
    ) is not None:  # the scoring script, as registered
        digests[SCORING_ASSET] = scoring
    digests.update(_evaluation_assets(paths, directory))
    sealed = _seal_assets(model, paths, record, directory, withheld)
    _loss_curve(paths, directory / "loss-curve.png")
    _sweep_curves(paths, record, directory / "sweep-trials.png")
    names = sorted(p.name for p in directory.iterdir()) + ["MODEL_CARD.md"]
    (directory / "MODEL_CARD.md").write_text(
        model_card(manifest, paths, record, version, names + [SUMS], run_url, sealed, download_url, previous)
    )
    files = sorted(p for p in directory.iterdir() if p.is_file())
    sums = {p.name: digests.get(p.name) or sha256_file(p) for p in files}
    (directory / SUMS).write_text(format_sums(sums))
    return files + [directory / SUMS]


def model_card(
    manifest: Manifest,
    paths: RunPaths,
    record: dict,
    version: int,
    assets: list[str],
    run_url: str | None = None,
    sealed: dict | None = None,
    download_url: str | None = None,
    previous: tuple[str, dict, dict | None] | None = None,
) -> str:
    """`previous`: (tag, metrics.json, usage.json) of the last release, to set this one's usage against."""
    try:
        lock = read_yaml(paths.lock) if paths.lock.exists() else {}
    except (OSError, BadRecord) as exc:
        raise PublishError(f"{paths.lock} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    lock = lock if isinstance(lock, dict) else {}
    git = record.get("git") or {}
    fetched = lock.get("inputs") or {}  # what this run was handed
    inputs = [
        {
            "name": name,
            "source": spec.source,
            "sha256": spec.sha256 or (fetched.get(name) or {}).get("sha256") or "(local path)",
        }
        for name, spec in manifest.inputs.items()
    ]
    return render(
        "MODEL_CARD.md.j2",
        name=manifest.name,
        version=version,
        run_id=record["run_id"],
        run_url=run_url,
        tftrain_version=runner.__version__,
        framework=manifest.model.framework,
        framework_version=manifest.model.framework_version or (lock.get("environment") or {}).get("framework_version"),
        commit=git.get("commit"),
        branch=git.get("branch"),
        tags=git.get("tags") or [],
        dirty=git.get("dirty"),
        inputs=inputs,
        metrics=metric_rows(record.get("metrics") or {}),
        serving=_serving(paths),
        assets=assets,
        sealed=sealed or {},
        download_url=download_url.rstrip("/") + "/" if download_url else "",
        usage=usage_section(record, previous),
        evaluation=_evaluation(record),
        replay=_replay(paths),
    )


def _replay(paths: RunPaths) -> str:
    """The card's replay section: the line and the table of serving/replay.json, if the run replayed."""
    from runner.replay.section import replay_markdown

    return replay_markdown(paths.serving, heading="##").strip("\n")


def _evaluation(record: dict) -> str:
    """The card's evaluation section: the seeds' evidence and the verdict the run reached, if any."""
    block = record.get("evaluation")
    if not isinstance(block, dict) or not isinstance(block.get("seeds"), list):
        return ""
    from runner.telemetry.evaluation_report import evaluation_markdown

    try:
        return evaluation_markdown(block, heading="## Evaluation").rstrip("\n")
    except (KeyError, TypeError, ValueError):  # a record another party wrote: the card goes without it
        return ""


def _withheld(manifest: Manifest, paths: RunPaths, record: dict, model: Path) -> frozenset[str]:
    """The model's files left out of the release: those registration skipped as holding a secret's
    value (version.json's "skipped"), and those that hold one of the secrets tftrain holds now."""
    from runner.history.secret_scan import secret_files, secret_values

    found = set(secret_files(model, secret_values(manifest.secrets)))
    if record.get("model"):
        from runner.shared.refs import ModelRef

        ref = ModelRef.parse(record["model"])
        try:
            info = read_json(paths.root.parent.parent / "models" / ref.name / f"v{ref.version}" / "version.json")
            skipped = info.get("skipped") if isinstance(info, dict) else None
        except (OSError, ValueError, RecursionError):  # _seal_assets says so, where it matters
            skipped = None
        for item in skipped if isinstance(skipped, list) else ():
            if (
                isinstance(item, dict)
                and item.get("kind") == EntryKind.SECRET.value
                and isinstance(item.get("path"), str)
            ):
                found.add(item["path"])
    return frozenset(found)


def _seal_assets(
    model: Path, paths: RunPaths, record: dict, directory: Path, withheld: frozenset[str] = frozenset()
) -> dict:
    """The registered version's provenance.intoto.json and model.sig, as assets (what version.json
    says of them, for the model card). The archive is packed from the run's model: a signature is
    published only when those files are still the ones it signed."""
    from runner.history.model_registry import SUMS as VERSION_SUMS
    from runner.history.provenance import FILE as PROVENANCE
    from runner.history.signing import SIGNATURE, Coverage, coverage_of
    from runner.shared.refs import ModelRef

    if not record.get("model"):
        return {}
    ref = ModelRef.parse(record["model"])
    version_dir = paths.root.parent.parent / "models" / ref.name / f"v{ref.version}"
    try:
        info = read_json(version_dir / "version.json")  # never a FIFO's endless wait, nor an endless nesting
    except FileNotFoundError:
        if not os.path.lexists(version_dir / SIGNATURE):
            return {}  # no record of the version here: nothing it says is left out
        raise _left_out(record, "missing") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise _left_out(record, getattr(exc, "strerror", None) or "not JSON") from None
    if not isinstance(info, dict):
        raise _left_out(record, "no version's record")
    sealed = {key: info[key] for key in ("signature", "provenance") if isinstance(info.get(key), dict)}
    if "provenance" in sealed and (version_dir / PROVENANCE).is_file():
        shutil.copy(version_dir / PROVENANCE, directory / PROVENANCE)
    if "signature" in sealed:
        try:
            registered = read_sums(version_dir / VERSION_SUMS)
        except (OSError, ValueError) as exc:  # the version's directory is the registry's, and others may write there
            raise PublishError(f"{record['model']}: {VERSION_SUMS}: {getattr(exc, 'strerror', None) or exc}") from None
        # as registration saw it: regular files only (links and the like were skipped, not signed)
        entries = walk(model) if model.is_dir() else [Entry(model.name, model, EntryKind.FILE)]
        current = {
            entry.name: sha256_file(entry.path)
            for entry in entries
            if entry.kind is EntryKind.FILE and entry.name not in withheld
        }
        if current != registered:
            raise PublishError(
                f"the run's model changed since it was registered as {record['model']}: its {SIGNATURE} would not"
                " verify"
            )
        if coverage_of(version_dir / SIGNATURE) is Coverage.VERSION and _served_files(
            paths, directory
        ) != _served_files_of(version_dir):
            raise PublishError(
                f"the run's serving files changed since it was registered as {record['model']}: its {SIGNATURE} would"
                " not verify"
            )
        copied = copy_file(version_dir / SIGNATURE, directory / SIGNATURE)  # never a link followed
        if not isinstance(copied, tuple):
            raise SignatureError(f"{record['model']}: {SIGNATURE} is {copied.described}")
    return {**sealed, "label": record["model"]}


def _evaluation_assets(paths: RunPaths, directory: Path) -> dict[str, str]:
    """The run's kept evidence (evaluation/evaluation.json and seed-N.jsonl, as its version keeps
    them) as the assets evaluation.json and evaluation-seed-N.jsonl; a link or anything but a regular
    file is not published. The baseline's re-evaluation kept there (baseline-*.jsonl, its log) is not."""
    from runner.serving.layout import EVALUATION_DIR, evaluation_asset, evaluation_relative

    kept = paths.root / EVALUATION_DIR
    if not kept.is_dir() or kept.is_symlink():
        return {}
    digests = {}
    for source in sorted(kept.iterdir()):
        asset = evaluation_asset(f"{EVALUATION_DIR}/{source.name}")
        if evaluation_relative(asset) is None:
            continue
        copied = copy_file(source, directory / asset)  # never a link followed
        if not isinstance(copied, tuple):
            raise PublishError(f"{source}: {copied.described}: the run's evidence cannot be published")
        digests[asset] = copied[0]
    return digests


def _served_files(paths: RunPaths, directory: Path) -> dict[str, str]:
    """What the release publishes beside the model (serving assets, the scoring files, the evaluation's
    evidence), by its path in a version directory → sha256: as `tftrain serve release:` and
    `models verify --from github` lay it out."""
    from runner.serving.layout import evaluation_relative
    from runner.serving.scoring.release import SCORING_DIR, kept_files
    from runner.serving.scoring.script import recorded

    found = {
        inside: sha256_file(directory / asset)
        for asset, inside in RELEASE_ASSETS.items()
        if (directory / asset).is_file()
    }
    for asset in sorted(directory.iterdir()):
        if (inside := evaluation_relative(asset.name)) is not None and asset.is_file():
            found[inside] = sha256_file(asset)
    scoring = recorded(paths.serving.parent)
    for name in kept_files(scoring) if scoring is not None else ():  # pack_scoring checked the names
        found[f"{SCORING_DIR}/{name}"] = sha256_file(paths.serving / SCORING_DIR / name)
    return found


def _served_files_of(version_dir: Path) -> dict[str, str]:
    from runner.history.signing import served_beside_model

    return {name: sha256_file(version_dir / name) for name in served_beside_model(version_dir)}


def _left_out(record: dict, why: str) -> PublishError:
    """A version.json that cannot be read: published without its signature and provenance, and
    nothing said, the release would read as an unsigned model."""
    return PublishError(
        f"{record['model']}: version.json: {why}: the release would leave out what it says (signature, provenance)"
    )


def usage_section(record: dict, previous: tuple[str, dict, dict | None] | None) -> str:
    """The card's usage table, and the change against the last release when there is one."""
    usage = usage_of(record)
    if usage is None:
        return ""
    line = (
        change_line(usage, usage_from(previous[2]), record.get("metrics") or {}, previous[1], previous[0])
        if previous
        else ""
    )
    return usage_markdown(usage) + ("\n" + line if line else "")


def _serving(paths: RunPaths) -> dict | None:
    """What the model gate recorded, as the model card shows it: each signature's inputs and outputs."""

    serving = optional_mapping(paths.serving / "serving.json")
    if not serving:
        return None
    from runner.serving.signature import signatures_from_json

    rows = [
        {"signature": name, "kind": kind, "name": spec.name, "dtype": spec.dtype, "shape": spec.shape_text()}
        for name, signature in signatures_from_json(serving.get("signatures") or {}).items()
        for kind, specs in (("input", signature.inputs), ("output", signature.outputs))
        for spec in specs
    ]
    return {**serving, "rows": rows}


def _loss_curve(paths: RunPaths, target: Path) -> bool:
    points = sampled(iter_series(paths.metrics), ("loss", "val_loss"))  # one pass, bounded
    if len({p.step for p in points}) < 2:
        return False
    series = {name: sorted((p.step, p.value) for p in points if p.name == name) for name in ("loss", "val_loss")}
    _plot(target, series, "loss")
    return True


def _sweep_curves(paths: RunPaths, record: dict, target: Path) -> bool:
    """The best trial of a sweep: the primary metric of every trial of its sweep, over steps."""
    if not record.get("sweep"):
        return False
    from runner.sweep.book import read_sweep

    try:
        document = read_sweep(paths.root.parent.parent, record["sweep"]["id"])
    except (OSError, ValueError):
        return False
    series = {
        f"trial {number}": list(enumerate(values, 1)) for number, values in document.get("curves", {}).items() if values
    }
    if not series:
        return False
    from runner.sweep.pareto import objective_metrics

    _plot(target, series, objective_metrics(document)[0])
    return True


def _plot(target: Path, series: dict[str, list[tuple]], ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=100)
    for label, points in series.items():
        if points:
            axis.plot([x for x, _ in points], [y for _, y in points], label=label)
    axis.set_xlabel("step")
    axis.set_ylabel(ylabel)
    if len(series) <= 20:
        axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(target)
    plt.close(figure)
