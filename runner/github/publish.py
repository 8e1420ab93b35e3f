"""Publishing a model version to the repository's GitHub Releases.

Version N is the next integer for the model's tag (`<name>-vN`); two publishers racing for the
same N are told apart by GitHub's "already exists" answer (HTTP 422), and the loser takes N+1.
The release is made as a draft, every asset is uploaded and verified (size and sha256), and only
then is the release published. A publish that stops half-way leaves a draft and a note in the run
directory; running `tftrain publish` again finishes it, skipping the assets already verified.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from runner.errors import PublishError, SignatureError, StorageError
from runner.github.release_assets import SUMS, build_assets
from runner.github.workflow import TagTemplate, failure, github_errors, releases_of
from runner.history.checksums import parse_sums, sha256_file
from runner.history.rundir import RunPaths
from runner.history.signing import SIGNATURE
from runner.history.states import RunStatus
from runner.manifest.model import Manifest
from runner.settings import Settings
from runner.storage.s3 import S3Target
from runner.telemetry.logger import Logger

ATTEMPTS = 4
BACKOFF_SECONDS = 0.5
CONTENT_TYPES = {".gz": "application/gzip", ".json": "application/json", ".md": "text/markdown", ".png": "image/png"}


@dataclass(frozen=True)
class Published:
    tag: str
    url: str


def publish(
    repo,
    manifest: Manifest,
    paths: RunPaths,
    record: dict,
    logger: Logger,
    force: bool = False,
    s3: S3Target | None = None,
    template: TagTemplate = TagTemplate(),
    run_url: str | None = None,
) -> Published:
    """`run_url`: the workflow run the model card links to."""
    if record.get("status") != RunStatus.COMPLETED:
        raise PublishError(f"run {record['run_id']} is {record.get('status')}: only a completed run is published")
    git = record.get("git") or {}
    if git.get("dirty") and not force:
        raise PublishError(
            f"run {record['run_id']} was trained from a checkout with uncommitted changes: commit them and train again,"
            " or publish anyway with --force"
        )
    if not (paths.workdir / manifest.model.path).exists():
        raise PublishError(f"run {record['run_id']} wrote no model at {manifest.model.path}")
    state_path = paths.release_state
    state = json.loads(state_path.read_text()) if state_path.exists() else None
    release = _resume(repo, state) if state else None
    if release is None:
        release, version = _create_draft(repo, manifest.name, git.get("commit"), template, logger)
        state = {"release_id": release.id, "tag": release.tag_name, "version": version, "verified": []}
        state_path.write_text(json.dumps(state))
    else:
        logger.info(f"resuming the draft release {release.tag_name}")
    try:
        with github_errors(PublishError):
            release = _upload_and_publish(
                release,
                manifest,
                paths,
                record,
                state,
                s3,
                run_url,
                logger,
                _previous(repo, manifest.name, template, logger),
            )
    except (PublishError, StorageError) as exc:  # S3 refusing the model keeps its own exit code
        raise type(exc)(
            f"{exc}; the release {state['tag']} stays a draft: run `tftrain publish --run {record['run_id']}` to"
            " finish it"
        ) from None
    logger.info(f"published {release.tag_name}: {release.html_url}", style="bold green")
    return Published(release.tag_name, release.html_url)


def _upload_and_publish(
    release,
    manifest: Manifest,
    paths: RunPaths,
    record: dict,
    state: dict,
    s3: S3Target | None,
    run_url: str | None,
    logger: Logger,
    previous: tuple[str, dict, dict | None] | None = None,
):
    """Upload (and verify) what the draft lacks, then publish it."""
    directory = paths.release_dir
    if (directory / SUMS).exists() and state["verified"]:  # resuming: the very files already uploaded
        assets = sorted(p for p in directory.iterdir() if p.name != SUMS) + [directory / SUMS]
    else:
        download_url = (
            str(getattr(release, "html_url", "") or "").replace("/releases/tag/", "/releases/download/", 1) or None
        )
        assets = build_assets(manifest, paths, record, state["version"], directory, s3, run_url, download_url, previous)
    digests = {**parse_sums((directory / SUMS).read_text()), SUMS: sha256_file(directory / SUMS)}
    existing = {asset.name: asset for asset in release.get_assets()}
    for path in assets:
        if path.name in state["verified"] and path.name in existing:
            continue
        _upload_verified(release, path, digests[path.name], existing.get(path.name), logger)
        state["verified"].append(path.name)
        paths.release_state.write_text(json.dumps(state))
    body = (directory / "MODEL_CARD.md").read_text()
    return release.update_release(name=release.tag_name, message=body, draft=False)


def _previous(repo, name: str, template: TagTemplate, logger: Logger) -> tuple[str, dict, dict | None] | None:
    """(tag, metrics.json, usage.json) of the last published release, for the model card's usage
    comparison; None when there is none or GitHub does not answer (the card goes without it)."""
    from runner.errors import ServiceError
    from runner.github.workflow import baseline_metrics, release_json

    try:
        baseline = baseline_metrics(repo, name, template)
        return (*baseline, release_json(repo, name, template, baseline[0], "usage.json")) if baseline else None
    except ServiceError as exc:
        logger.warning(f"the model card goes without the last release's usage: {exc}")
        return None


def _resume(repo, state: dict):
    from github import GithubException

    try:
        release = repo.get_release(state["release_id"])
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    return release


def _create_draft(repo, name: str, commit: str | None, template: TagTemplate, logger: Logger):
    from github import GithubException

    # drafts count: a draft holds its number while another publisher finishes it
    latest = next((v for v, _ in releases_of(repo, name, template, drafts=True)), 0)
    for version in range(latest + 1, latest + 50):
        tag = template.tag(name, version)
        try:
            release = repo.create_git_release(tag, tag, f"Publishing {tag}…", draft=True, target_commitish=commit or "")
        except GithubException as exc:
            if exc.status == 422 and "already_exists" in json.dumps(exc.data):
                logger.info(f"{tag} was taken by another publisher; trying v{version + 1}")
                continue
            raise PublishError(f"creating the release {tag}: {failure(exc)}") from None
        logger.info(f"draft release {tag}")
        return release, version
    raise PublishError(f"no free version for {name} after v{latest + 49}")


def _upload_verified(release, path: Path, digest: str, existing, logger: Logger) -> None:
    """Upload with retries on 5xx and connection errors, then check size and sha256 (`digest`,
    what SHA256SUMS says of the file)."""
    from github import GithubException
    from requests.exceptions import RequestException

    if existing is not None and _verified(existing, path, digest):
        return
    if existing is not None:  # an earlier, broken upload: replace it
        existing.delete_asset()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            asset = release.upload_asset(
                str(path), name=path.name, content_type=CONTENT_TYPES.get(path.suffix, "application/octet-stream")
            )
        except GithubException as exc:
            if exc.status >= 500 and attempt < ATTEMPTS:
                logger.info(f"uploading {path.name}: HTTP {exc.status}, retrying")
                time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
                continue
            raise PublishError(f"uploading {path.name}: {failure(exc)}") from None
        except RequestException as exc:  # connection errors
            if attempt < ATTEMPTS:
                logger.info(f"uploading {path.name}: {type(exc).__name__}, retrying")
                time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
                continue
            raise PublishError(f"uploading {path.name}: {failure(exc)}") from None
        if not _verified(asset, path, digest):
            raise PublishError(f"{path.name} on the release does not match the file uploaded (size or sha256)")
        logger.info(f"  {path.name} ({path.stat().st_size} bytes, sha256 {digest[:12]}) verified")
        return


def _verified(asset, path: Path, digest: str) -> bool:
    if asset.size != path.stat().st_size:
        return False
    reported = getattr(asset, "digest", None)
    if reported:
        return reported == f"sha256:{digest}"
    return _downloaded_digest(asset) == digest


def _downloaded_digest(asset) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "asset"
        asset.download_asset(str(target))
        return sha256_file(target)


def pull_release(
    repo, ref: str, out_dir: Path, logger: Logger, settings: Settings, signature: Path | None = None
) -> str:
    """Download NAME@vN (or NAME@latest) from the Releases, verify it against SHA256SUMS, extract
    it safely into out_dir. Returns the tag. `settings` give the tag template, the archive limits
    and, for a model in S3, the endpoint that overrides its pointer's. `signature`: where to put the
    release's model.sig (checked against SHA256SUMS too); SignatureError when it has none."""
    import tempfile

    from runner.history.archive import unpack
    from runner.history.checksums import read_sums
    from runner.history.model_registry import parse_ref
    from runner.storage.s3 import download

    release = _release_for(repo, *parse_ref(ref), TagTemplate(settings.inputs.tag_template))
    assets = {asset.name: asset for asset in release.get_assets()}
    model = "model.tar.gz" if "model.tar.gz" in assets else "model.s3.json"
    for needed in (SUMS, model):
        if needed not in assets:
            raise PublishError(f"release {release.tag_name} has no {needed}")
    if signature is not None and SIGNATURE not in assets:
        raise SignatureError(f"release {release.tag_name} has no {SIGNATURE}: it was not signed (model.signing)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise PublishError(f"{out_dir} exists and is not empty; choose an empty or new directory")
    with tempfile.TemporaryDirectory() as tmp:
        for needed in (SUMS, model):
            assets[needed].download_asset(str(Path(tmp) / needed))
        try:
            expected = read_sums(Path(tmp) / SUMS).get(model)
        except ValueError as exc:
            raise PublishError(f"release {release.tag_name}: {exc}") from None
        actual = sha256_file(Path(tmp) / model)
        if expected != actual:
            raise PublishError(f"{model} of {release.tag_name} does not match its SHA256SUMS ({actual} ≠ {expected})")
        if signature is not None:
            assets[SIGNATURE].download_asset(str(signature))
            if read_sums(Path(tmp) / SUMS).get(SIGNATURE) != sha256_file(signature):
                raise SignatureError(f"{SIGNATURE} of {release.tag_name} does not match its SHA256SUMS")
        if model == "model.s3.json":  # the pointer is verified; the object is checked against it
            download(
                json.loads((Path(tmp) / model).read_text()), Path(tmp) / "model.tar.gz", settings.inputs.s3_endpoint_url
            )
        # a matching sha256 says the asset is what was published, not that it is safe to extract
        unpack(
            Path(tmp) / "model.tar.gz",
            out_dir,
            label=f"model.tar.gz of {release.tag_name}",
            limits=settings.archive_limits,
        )
    logger.info(f"{release.tag_name} → {out_dir} (sha256 verified)", style="green")
    return release.tag_name


def _release_for(repo, name: str, version: int | None, template: TagTemplate):
    from github import GithubException

    if version is not None:
        try:
            return repo.get_release(template.tag(name, version))
        except GithubException as exc:
            if exc.status != 404:
                raise
            raise PublishError(f"no release {template.tag(name, version)}: {failure(exc)}") from None
    published = releases_of(repo, name, template)
    if not published:
        raise PublishError(f"no published release of {name} (tags {template.tag(name, 'N')})")
    return published[0][1]
