"""Remote inputs: https:// files, lists of them, and s3:// prefixes, downloaded once into the
content-addressed cache under runner.paths.data_cache() and checked against the manifest's sha256."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NamedTuple

from runner.errors import PreparingError, StorageError
from runner.history.checksums import CHUNK, format_sums, sha256_file, sums_of
from runner.manifest.model import InputSpec
from runner.manifest.sources import url_file_name
from runner.paths import data_cache
from runner.storage.s3 import Bucket
from runner.telemetry.logger import Logger

PROGRESS_SECONDS = 1.0


def fetch_remote(spec: InputSpec, where: str, logger: Logger, dry_run: bool) -> Path:
    if isinstance(spec.source, list):
        return _several(spec, where, logger, dry_run)
    source = S3Source if urllib.parse.urlparse(spec.source).scheme.lower() == "s3" else HttpSource
    return _cached(spec, where, logger, dry_run, source)


def _index_path(spec: InputSpec) -> Path:
    sources = "\n".join(spec.source) if isinstance(spec.source, list) else spec.source
    key = hashlib.sha256(f"{sources}\0{spec.endpoint_url or ''}".encode()).hexdigest()
    return data_cache() / "sources" / f"{key}.json"


def _index(spec: InputSpec) -> dict | None:
    """What the cache knows of a remote source: the digest and path of its last download."""
    path = _index_path(spec)
    return json.loads(path.read_text()) if path.exists() else None


def _cached(spec: InputSpec, where: str, logger: Logger, dry_run: bool, source) -> Path:
    index_path = _index_path(spec)
    index = _index(spec)
    if dry_run:
        return Path(index["path"]) if index else data_cache() / "sha256" / "<digest>"
    listed = None
    if index and Path(index["path"]).exists():
        listed = source.listing(spec, where)
        if source.is_current(listed, index):
            _check_digest(spec, index["digest"], where)
            logger.info(f"{where}: {spec.source} (cached, sha256 {index['digest'][:12]})")
            return Path(index["path"])
    staging = Path(tempfile.mkdtemp(prefix="download-", dir=_ensure(data_cache())))
    try:
        name, listing = source.download(spec, listed, staging, where, logger)
        digest = _digest(staging)
        _check_digest(spec, digest, where)
        target = data_cache() / "sha256" / digest
        if not target.exists():
            _ensure(target.parent)
            staging.rename(target)
        path = target / name if name else target
        index_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"source": spec.source, "digest": digest, "path": str(path), "listing": listing, "time": time.time()}
        index_path.write_text(json.dumps(record, indent=2))
        logger.info(f"{where}: {spec.source} → {path} (sha256 {digest[:12]})")
        return path
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _several(spec: InputSpec, where: str, logger: Logger, dry_run: bool) -> Path:
    """A list of https:// files as one directory. Each file is fetched and cached by its content
    exactly as a single source is; the directory, made of links to them, is cached by the
    SHA256SUMS of its files (the digest `sha256` pins), so a run sees all of them or fails."""
    files = {}
    for index, url in enumerate(spec.source):
        one = spec.model_copy(update={"source": url, "sha256": None})
        files[url_file_name(url)] = _cached(one, f"{where}[{index}]", logger, dry_run, HttpSource)
    if dry_run:
        index = _index(spec)
        return Path(index["path"]) if index else data_cache() / "sha256" / "<digest>"
    staging = Path(tempfile.mkdtemp(prefix="download-", dir=_ensure(data_cache())))
    try:
        for name, path in files.items():  # names differ and are plain: the manifest's check
            _link(path, staging / name)
        digest = _digest(staging)
        _check_digest(spec, digest, where)
        target = data_cache() / "sha256" / digest
        try:
            staging.rename(target)
        except OSError:  # already there (another run made it first): the same content, by its name
            if not target.is_dir():
                raise PreparingError(f"{where}: cannot store the download in {target}") from None
        record = {"source": spec.source, "digest": digest, "path": str(target), "listing": None, "time": time.time()}
        _index_path(spec).write_text(json.dumps(record, indent=2))
        logger.info(f"{where}: {len(files)} files → {target} (sha256 {digest[:12]})")
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _link(cached: Path, name: Path) -> None:
    """A cached file under a second name, without a second copy where the file system allows."""
    try:
        os.link(cached, name)
    except OSError:
        shutil.copyfile(cached, name)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(root: Path) -> str:
    """One sha256 for a download: of the file, or of the SHA256SUMS of a directory of files."""
    files = [p for p in root.rglob("*") if p.is_file()]
    if len(files) == 1 and files[0].parent == root:
        return sha256_file(files[0])
    return hashlib.sha256(format_sums(sums_of(root)).encode()).hexdigest()


def _check_digest(spec: InputSpec, digest: str, where: str) -> None:
    if spec.sha256 and spec.sha256 != digest:
        shown = f"the SHA256SUMS of its {len(spec.source)} files" if isinstance(spec.source, list) else spec.source
        raise PreparingError(f"{where}: {shown} has sha256 {digest}, but the manifest expects {spec.sha256}")


class _Progress:
    def __init__(self, logger: Logger, label: str, total: int | None) -> None:
        self.logger, self.label, self.total = logger, label, total
        self.done = 0
        self.shown = time.monotonic()

    def add(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.shown >= PROGRESS_SECONDS:
            self.shown = now
            part = (
                f"{100 * self.done / self.total:.0f}% of {self.total / 1e6:.1f} MB"
                if self.total
                else f"{self.done / 1e6:.1f} MB"
            )
            self.logger.info(f"  downloading {self.label}: {part}")


class HttpSource:
    @staticmethod
    def listing(spec: InputSpec, where: str) -> None:
        return None  # an https input is fetched once; pin its content with `sha256` to be sure

    @staticmethod
    def is_current(listed: None, index: dict) -> bool:
        return True

    @staticmethod
    def download(spec: InputSpec, listed: None, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
        return _download_http(spec, staging, where, logger)


def _download_http(spec: InputSpec, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
    name = url_file_name(spec.source)
    name = name if name not in ("", ".", "..") else "download"
    request = urllib.request.Request(spec.source, headers={"User-Agent": "tftrain"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response, (staging / name).open("wb") as out:
            length = response.headers.get("Content-Length")
            progress = _Progress(logger, spec.source, int(length) if length else None)
            while chunk := response.read(CHUNK):
                out.write(chunk)
                progress.add(len(chunk))
            listing = {"etag": response.headers.get("ETag"), "length": length}
    except urllib.error.HTTPError as exc:
        raise PreparingError(f"{where}: {spec.source}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PreparingError(f"{where}: {spec.source}: {reason}") from None
    return name, listing


class _S3Listing(NamedTuple):
    bucket: Bucket
    prefix: str
    objects: list[dict]


def _s3_listing(spec: InputSpec, where: str) -> _S3Listing:
    parsed = urllib.parse.urlparse(spec.source)
    bucket, prefix = Bucket(parsed.netloc, spec.endpoint_url), parsed.path.lstrip("/")
    try:
        objects = bucket.listing(prefix)
    except StorageError as exc:
        raise PreparingError(f"{where}: {spec.source}: {exc}") from None
    if not objects:
        raise PreparingError(f"{where}: {spec.source}: no such object or prefix")
    return _S3Listing(bucket, prefix, objects)


def _fingerprint(objects: list[dict]) -> dict:
    return {item["Key"]: [item["Size"], item.get("ETag")] for item in objects}


def _download_s3(spec: InputSpec, listed: _S3Listing, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
    bucket, prefix, objects = listed
    progress = _Progress(logger, spec.source, sum(item["Size"] for item in objects))
    single = len(objects) == 1 and objects[0]["Key"] == prefix
    for item in objects:
        key = item["Key"]
        relative = Path(key).name if single else key[len(prefix) :].lstrip("/")
        if not relative or key.endswith("/"):
            continue
        target = (staging / relative).resolve()
        if not target.is_relative_to(staging.resolve()):
            raise PreparingError(f"{where}: object key {key!r} leaves the download directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            bucket.fetch(key, target, progress.add)
        except StorageError as exc:
            raise PreparingError(f"{where}: {spec.source}: {exc}") from None
    return (Path(prefix).name if single else ""), _fingerprint(objects)


class S3Source:
    @staticmethod
    def listing(spec: InputSpec, where: str) -> _S3Listing:
        return _s3_listing(spec, where)

    @staticmethod
    def is_current(listed: _S3Listing, index: dict) -> bool:
        """Listing the prefix is cheap: download again only when an object changed."""
        return _fingerprint(listed.objects) == index.get("listing")

    @staticmethod
    def download(
        spec: InputSpec, listed: _S3Listing | None, staging: Path, where: str, logger: Logger
    ) -> tuple[str, dict]:
        """`listed`: the listing is_current looked at, when it did (a stale input is listed once)."""
        return _download_s3(spec, listed or _s3_listing(spec, where), staging, where, logger)
