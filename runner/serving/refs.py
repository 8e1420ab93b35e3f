"""What `tftrain serve REF` serves: REF (NAME@vN, NAME@latest, a run id, or
release:NAME@vN|@latest) turned into a version directory of its own — model/, serving/ and
model.onnx as the registry keeps them — copied out and verified, removed when serving ends.

The layout (VersionDir, Runtime) is also read by the model server inside the serving
environment: this module imports the registry and GitHub only inside the functions that need them.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from runner.serving.layout import RELEASE_ASSETS, VersionDir

if TYPE_CHECKING:
    from runner.settings import ArchiveLimits

RELEASE_PREFIX = "release:"


@dataclass(frozen=True)
class Served:
    name: str  # the model's name: the URL's /v1/models/NAME
    label: str  # NAME@vN, or the release's tag
    version: int | None
    framework_version: str | None  # the TensorFlow release the serving environment holds
    directory: VersionDir


COPY_PREFIX = "tftrain-serve-"


@contextmanager
def checked_out(
    ref: str,
    logger,
    github_repo: Callable[[], tuple[object, object]] | None = None,
    workspace: Path | None = None,
    home: Path | None = None,
    signature: Path | None = None,
) -> Iterator[Served]:
    """REF copied into a temporary directory (checksums verified), removed on the way out; into
    `workspace` (an empty directory the caller owns and removes) when one is given.
    `github_repo`: () → (PyGithub repository, settings), called only for a release: REF;
    `home`: the TFTRAIN_HOME whose registry any other REF is looked up in; `signature`: where to put
    a copy of the version's model.sig (outside the copy), taken before its files: SignatureError
    when it has none."""
    with (
        nullcontext(str(workspace)) if workspace is not None else tempfile.TemporaryDirectory(prefix=COPY_PREFIX)
    ) as tmp:
        root = Path(tmp) / "version"
        if ref.startswith(RELEASE_PREFIX):
            if github_repo is None:
                raise AssertionError("a release: REF needs the GitHub repository")
            yield _from_release(ref[len(RELEASE_PREFIX) :], root, logger, *github_repo(), signature)
        else:
            if home is None:
                raise AssertionError("a registry REF needs the TFTRAIN_HOME")
            yield _from_registry(ref, root, home, signature)


def _from_registry(ref: str, root: Path, home: Path, signature: Path | None = None) -> Served:
    from runner.errors import NotFoundError
    from runner.history.model_registry import Registry, checkout_version
    from runner.history.store import Store

    with Store(home) as store:
        registry = Registry(store)
        if "@" in ref:
            model = registry.resolve(ref)
        else:  # a run id (or number, or `latest`), else a model's name: its latest version
            try:
                model = registry.resolve(_run_model(store, ref))
            except NotFoundError:
                try:
                    model = registry.resolve(ref)
                except NotFoundError:
                    raise NotFoundError(
                        f"{ref!r} is neither a run nor a registered model: use NAME@vN, NAME@latest, a run id "
                        "or release:NAME@vN (see `tftrain models` and `tftrain runs`)"
                    ) from None
        if signature is not None:  # first: the files copied next are checked against this copy of it
            from runner.history.sealing import copy_signature

            copy_signature(model, signature)
        root.mkdir(parents=True)
        checkout_version(model, root)
    recorded = (model.info.get("serving") or {}).get("tensorflow") or (VersionDir(root).serving() or {}).get(
        "tensorflow"
    )
    return Served(
        model.name, model.label, model.version, recorded or model.info.get("framework_version"), VersionDir(root)
    )


def _run_model(store, ref: str) -> str:
    from runner.errors import NotFoundError
    from runner.history.record import RunRecord

    run = store.run(ref)
    try:
        label = RunRecord.read(run.run_dir / "run.json").model
    except (OSError, ValueError):
        label = None
    if not label:
        raise NotFoundError(f"run {run.run_id} registered no model (it is {run.status.value})")
    return label


def _from_release(ref: str, root: Path, logger, repo, settings, signature: Path | None = None) -> Served:
    from runner.github.publish import pull_release
    from runner.history.model_registry import parse_ref
    from runner.shared.refs import number

    name, _ = parse_ref(ref)
    tag = pull_release(repo, ref, root / "model", logger, settings, signature)
    fetch_serving_assets(repo.get_release(tag), root, settings.archive_limits)
    serving = VersionDir(root).serving() or {}
    version = tag.rsplit("-v", 1)[-1]
    return Served(name, tag, number(version), serving.get("tensorflow"), VersionDir(root))


def fetch_serving_assets(release, root: Path, limits: ArchiveLimits) -> None:
    """serving.json, the sample, the predictions and model.onnx where the release has them, the
    evaluation's evidence (evaluation.json, evaluation-seed-N.jsonl → evaluation/) and the scoring
    script (scoring.tar.gz) when serving.json names one, each verified against the release's
    SHA256SUMS (pull_release checked the model itself): the version's layout, as registered."""
    from runner.errors import PublishError
    from runner.serving.layout import EVALUATION_DIR as DIRECTORY
    from runner.serving.layout import EVALUATION_SUMMARY as SUMMARY
    from runner.serving.layout import MAX_EVIDENCE_BYTES as MAX_BYTES
    from runner.serving.layout import MAX_SEEDS, evaluation_relative
    from runner.serving.scoring.release import SCORING_ASSET, unpack_scoring
    from runner.serving.scoring.script import recorded

    assets = {asset.name: asset for asset in release.get_assets()}
    wanted = {name: RELEASE_ASSETS[name] for name in RELEASE_ASSETS if name in assets}
    evidence = {name: inside for name in sorted(assets) if (inside := evaluation_relative(name)) is not None}
    seeds = sum(1 for inside in evidence.values() if inside != f"{DIRECTORY}/{SUMMARY}")
    if seeds > MAX_SEEDS:
        raise PublishError(
            f"release {release.tag_name}: {seeds} evaluation-seed-N.jsonl assets, over the {MAX_SEEDS} seeds a set may"
            " hold"
        )
    if not wanted and not evidence:
        return
    fetched = VerifiedAssets(release, assets, root)
    for name, inside in wanted.items():
        fetched(name, root / inside)
    for name, inside in evidence.items():
        fetched(name, root / inside, MAX_BYTES)
    scoring = recorded(root)
    if scoring is None:  # no scoring script: scoring.tar.gz, if any, is not read
        return
    if SCORING_ASSET not in assets:
        raise PublishError(
            f"release {release.tag_name} has no {SCORING_ASSET}, yet its serving.json names the scoring script"
            f" {str(scoring['script'])[:80]!r}"
        )
    archive = root / SCORING_ASSET
    try:
        unpack_scoring(fetched(SCORING_ASSET, archive), root, scoring, f"{SCORING_ASSET} of {release.tag_name}", limits)
    finally:
        archive.unlink(missing_ok=True)


class VerifiedAssets:
    """A release's assets downloaded one by one, each checked against the release's SHA256SUMS (read
    once, here): a release's files are another party's. An asset the sums do not name, or that does
    not match them, is a PublishError and is not left behind."""

    def __init__(self, release, assets: dict, scratch: Path) -> None:
        from runner.errors import PublishError
        from runner.github.release_assets import SUMS
        from runner.history.checksums import read_sums

        self.release, self.assets = release, assets
        if SUMS not in assets:
            raise PublishError(f"release {release.tag_name} has no {SUMS}")
        scratch.mkdir(parents=True, exist_ok=True)
        sums_path = scratch / SUMS
        assets[SUMS].download_asset(str(sums_path))
        try:
            self.sums = read_sums(sums_path)
        except ValueError as exc:
            raise PublishError(f"release {release.tag_name}: {exc}") from None
        finally:
            sums_path.unlink(missing_ok=True)

    def __call__(self, name: str, target: Path, max_bytes: int | None = None) -> Path:
        """`max_bytes`: a larger asset (as the release lists it) is refused before it is downloaded."""
        from runner.errors import PublishError
        from runner.history.checksums import sha256_file

        if name not in self.sums:
            raise PublishError(f"{name} of {self.release.tag_name} is not in its SHA256SUMS")
        size = getattr(self.assets[name], "size", None)
        if max_bytes is not None and isinstance(size, int) and size > max_bytes:
            raise PublishError(
                f"{name} of {self.release.tag_name} is {size >> 20} MB, over the {max_bytes >> 20} MB limit"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        self.assets[name].download_asset(str(target))
        if self.sums[name] != sha256_file(target):
            target.unlink(missing_ok=True)
            raise PublishError(f"{name} of {self.release.tag_name} does not match its SHA256SUMS")
        return target
