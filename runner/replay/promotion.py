"""`model.replay:` at registration: after the gate, the candidate answers the replayed requests beside
the baseline (the last release, or the version `against` names); below min_agreement, or slower than
max_latency_ratio, it is not registered (ReplayError, one line naming what disagreed and where the
report is). What the version keeps (and its release publishes): serving/replay.json, the report, and
serving/replay-requests.jsonl, the requests replayed — the next release's replay can take them
(`requests: release:TAG`).

The candidate is served from the run's own files: a version directory under the run's replay/ whose
model/ holds hard links to model.path's files (copies only across filesystems: a model may be
gigabytes) and whose serving/ holds the gate's files, removed when the replay ends."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runner.errors import NotFoundError, ReplayError
from runner.manifest import LoadedManifest
from runner.manifest.replay import LAST_RELEASE, ReplaySpec
from runner.replay.sources import load_requests
from runner.serving.layout import REPLAY_REPORT, REPLAY_REQUESTS, VersionDir
from runner.serving.records import Request, RequestsError, is_warmup, write_requests
from runner.serving.refs import RELEASE_PREFIX, Served
from runner.telemetry.logger import Logger


@dataclass(frozen=True)
class GitHub:
    """The run's GitHub repository, as the pipeline reaches it (replay/ imports nothing of github/)."""

    repo: Callable[[], tuple[object, object]]  # () → (PyGithub repository, settings), as runner.serving.refs takes it
    last_release: Callable[[str], int | None]  # a model's newest published release's version, None: none yet


WORK_DIR = "replay"  # the run directory's scratch for the candidate's version directory


def requests_of(
    spec: ReplaySpec, source_dir: Path, github: GitHub | None, scratch: Path, logger: Logger
) -> tuple[list[Request], str]:
    """The first max_requests requests `requests:` names, and where they came from (for the report's
    line); ReplayError naming model.replay.requests, the file and the line when they cannot be read."""
    tag = spec.from_release
    try:
        if tag is None:
            requests = load_requests(source_dir / spec.requests)
            origin = spec.requests
        else:
            requests = load_requests(_release_requests(tag, github, scratch))
            origin = f"the requests {tag} kept"
    except RequestsError as exc:
        raise ReplayError(f"model.replay.requests: {exc}") from None
    if len(requests) > spec.max_requests:
        logger.info(
            f"replay: the first {spec.max_requests} of {len(requests)} requests in {origin} (model.replay.max_requests)"
        )
    return requests[: spec.max_requests], origin


def check_requests(spec: ReplaySpec, source_dir: Path) -> None:
    """The committed requests read before anything trains (a release's are fetched at registration);
    ReplayError naming model.replay.requests, the file and the line."""
    path = source_dir / spec.requests
    if spec.from_release is None and not (
        path.is_file() and is_warmup(path)
    ):  # a warmup file needs TensorFlow: read at registration
        try:
            load_requests(path)
        except RequestsError as exc:
            raise ReplayError(f"model.replay.requests: {exc}") from None


def _release_requests(tag: str, github: GitHub | None, scratch: Path) -> Path:
    """The release's replay-requests.jsonl, verified against its SHA256SUMS."""
    from runner.serving.records import MAX_FILE_BYTES
    from runner.serving.refs import VerifiedAssets

    if github is None:
        raise ReplayError(
            f"model.replay.requests: release:{tag} needs the GitHub repository (GITHUB_REPOSITORY and a token)"
        )
    release = github.repo()[0].get_release(tag)
    assets = {asset.name: asset for asset in release.get_assets()}
    if REPLAY_REQUESTS not in assets:
        raise ReplayError(
            f"model.replay.requests: release {tag} kept no {REPLAY_REQUESTS} (it was registered without model.replay)"
        )
    return VerifiedAssets(release, assets, scratch)(REPLAY_REQUESTS, scratch / REPLAY_REQUESTS, MAX_FILE_BYTES)


def baseline_ref(spec: ReplaySpec, name: str, github: GitHub | None, home: Path) -> str | None:
    """The reference `against:` names, as `tftrain serve` takes it; None when there is no version yet
    (the first release: the candidate is replayed alone). last-release: the newest published release
    where the run knows its GitHub repository and has a token, else the version this home registered last."""
    if spec.against != LAST_RELEASE:
        return spec.against
    if github is not None:
        version = github.last_release(name)
        return f"{RELEASE_PREFIX}{name}@v{version}" if version is not None else None
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    with Store(home) as store:
        versions = Registry(store).versions(name)
    return versions[-1].label if versions else None


@contextlib.contextmanager
def candidate_version(
    run_root: Path, model_path: Path, kept: dict[str, Path], name: str, framework: str | None
) -> Iterator[Served]:
    """The candidate as a version directory `tftrain serve` could serve: model/ a link to the run's
    model (the gate checked it stays inside outputs/), the gate's files copied; removed after."""
    scratch = (
        run_root / WORK_DIR / "candidate"
    )  # the server's pythonpath link goes beside the version: both removed after
    shutil.rmtree(scratch, ignore_errors=True)
    root = scratch / "version"
    root.mkdir(parents=True)
    try:
        if model_path.is_dir():
            shutil.copytree(model_path, root / "model", symlinks=True, copy_function=_link_or_copy)
        else:
            (root / "model").mkdir()
            _link_or_copy(model_path, root / "model" / model_path.name)
        for relative, source in kept.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        yield Served(name, f"{name} (this run)", None, framework, VersionDir(root))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _link_or_copy(source, target) -> None:
    """A hard link where the run's directory and the scratch share a filesystem (no model copied
    twice), else a copy; the server reads links as the registry's copy would never have them."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def replay_before_registering(
    loaded: LoadedManifest,
    run_root: Path,
    serving_dir: Path,
    model_path: Path,
    kept: dict[str, Path],
    framework: str | None,
    github: GitHub | None,
    home: Path,
    logger: Logger,
) -> dict[str, Path]:
    """Replay the candidate against its baseline; the files the version keeps (by their path in the
    version), or ReplayError when the candidate is refused. `github`: where the run knows its GitHub
    repository and has a token (else None: no releases)."""
    from runner.history.rundir import writing
    from runner.replay.engine import ReplayOptions, replay
    from runner.serving.refs import checked_out

    spec, name = loaded.manifest.model.replay, loaded.manifest.name
    scratch = run_root / WORK_DIR
    scratch.mkdir(exist_ok=True)
    requests, origin = requests_of(spec, loaded.source_dir, github, scratch, logger)
    ref = baseline_ref(spec, name, github, home)
    options = ReplayOptions(spec.concurrency, spec.tolerance, spec.timeout_seconds, origin=origin)
    with contextlib.ExitStack() as stack:
        baseline = None
        if ref is not None:
            try:
                baseline = stack.enter_context(
                    checked_out(ref, logger, github.repo if github else None, scratch / "baseline", home)
                )
            except NotFoundError as exc:
                raise ReplayError(f"model.replay.against: {exc}") from None
            stack.callback(shutil.rmtree, scratch / "baseline", True)
        candidate = stack.enter_context(candidate_version(run_root, model_path, kept, name, framework))
        logger.info(
            f"replay: {len(requests)} requests from {origin} against "
            f"{baseline.label if baseline else 'no baseline (the first version): the candidate alone'}"
        )
        report = replay(requests, candidate, baseline, options, logger, scratch)
    report_path = serving_dir / REPLAY_REPORT
    with writing(report_path):  # a full disk: DiskFullError naming the file
        report_path.write_text(report.to_text())
    requests_path = serving_dir / REPLAY_REQUESTS
    requests_path.unlink(missing_ok=True)
    with writing(requests_path):
        write_requests(requests_path, requests)
    logger.info(report.line())
    problems = report.problems(spec.min_agreement, spec.max_latency_ratio)
    if problems:
        raise ReplayError(f"model not registered: the replay refused it: {'; '.join(problems)} (report: {report_path})")
    if spec.warmup:
        write_warmup_into(model_path, serving_dir, requests, name, logger)
    return {f"serving/{REPLAY_REPORT}": report_path, f"serving/{REPLAY_REQUESTS}": requests_path}


def write_warmup_into(model_path: Path, serving_dir: Path, requests: list[Request], name: str, logger: Logger) -> None:
    """The replayed requests as TF Serving's warmup file in the SavedModel the gate checked (before the
    version is registered and signed: it is part of model/). A Keras file has no assets.extra/: nothing
    written; without TensorFlow here (the `replay` extra) a warning, never a refusal."""
    from runner.errors import FatalError
    from runner.history.untrusted import optional_mapping
    from runner.replay.warmup import put_into_saved_model
    from runner.serving.signature import signatures_from_json

    serving = optional_mapping(serving_dir / "serving.json")
    if serving.get("format") != "saved_model" or not isinstance(serving.get("path"), str):
        return
    try:
        signature = signatures_from_json(serving["signatures"])[serving["signature"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        logger.warning("replay: no warmup file written: the gate recorded no serving signature")
        return
    try:
        written = put_into_saved_model(model_path / serving["path"], requests, signature, name, logger)
    except (FatalError, RequestsError, OSError) as exc:  # MissingExtra, no request fits, no room: still registered
        reason = f"{exc.strerror} ({exc.filename})" if isinstance(exc, OSError) and exc.strerror else exc
        logger.warning(f"replay: no warmup file written into the SavedModel: {reason}")
        return
    logger.info(
        f"replay: {written} of the replayed requests written as assets.extra/tf_serving_warmup_requests (TF Serving"
        " warms up on them)"
    )
