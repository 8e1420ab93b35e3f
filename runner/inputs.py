"""Inputs (datasets): local paths, https:// files and s3:// prefixes.

Remote inputs are downloaded once into a content-addressed cache (`<cache>/data/sha256/<digest>`)
and handed to the training read-only: a path on this machine, a read-only mount in a container.
`mode` (download | mount) is accepted as in Azure ML; both read from the cached copy.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from runner.checksums import CHUNK, sha256_file, sums_of
from runner.errors import PreparingError
from runner.logger import Logger
from runner.manifest import LoadedManifest
from runner.manifest.model import InputSpec
from runner.paths import cache_dir

PROGRESS_SECONDS = 1.0


def fetch_inputs(loaded: LoadedManifest, logger: Logger, dry_run: bool = False) -> dict[str, Path]:
    paths = {}
    for name, spec in loaded.manifest.inputs.items():
        where = f"inputs.{name}.source"
        scheme = urllib.parse.urlparse(spec.source).scheme
        if scheme in ("http", "https"):
            paths[name] = _cached(spec, where, logger, dry_run, HttpSource)
        elif scheme == "s3":
            paths[name] = _cached(spec, where, logger, dry_run, S3Source)
        elif "://" in spec.source:
            raise PreparingError(f"{where}: {spec.source!r}: only https://, http://, s3:// or a local path")
        else:
            path = (loaded.base_dir / spec.source).resolve()
            if not path.exists():
                raise PreparingError(f"{where}: {path} does not exist")
            paths[name] = path
    return paths


def data_root() -> Path:
    return cache_dir() / "data"


def _index_path(spec: InputSpec) -> Path:
    key = hashlib.sha256(f"{spec.source}\0{spec.endpoint_url or ''}".encode()).hexdigest()
    return data_root() / "sources" / f"{key}.json"


def _cached(spec: InputSpec, where: str, logger: Logger, dry_run: bool, source) -> Path:
    index_path = _index_path(spec)
    index = json.loads(index_path.read_text()) if index_path.exists() else None
    if dry_run:
        return Path(index["path"]) if index else data_root() / "sha256" / "<digest>"
    if index and Path(index["path"]).exists() and source.is_current(spec, index, where):
        _check_digest(spec, index["digest"], where)
        logger.info(f"{where}: {spec.source} (cached, sha256 {index['digest'][:12]})")
        return Path(index["path"])
    staging = Path(tempfile.mkdtemp(prefix="download-", dir=_ensure(data_root())))
    try:
        name, listing = source.download(spec, staging, where, logger)
        digest = _digest(staging)
        _check_digest(spec, digest, where)
        target = data_root() / "sha256" / digest
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


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(root: Path) -> str:
    """One sha256 for a download: of the file, or of the SHA256SUMS of a directory of files."""
    files = [p for p in root.rglob("*") if p.is_file()]
    if len(files) == 1 and files[0].parent == root:
        return sha256_file(files[0])
    listing = "".join(f"{digest}  {name}\n" for name, digest in sums_of(root).items())
    return hashlib.sha256(listing.encode()).hexdigest()


def _check_digest(spec: InputSpec, digest: str, where: str) -> None:
    if spec.sha256 and spec.sha256 != digest:
        raise PreparingError(f"{where}: {spec.source} has sha256 {digest}, but the manifest expects {spec.sha256}")


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
            part = f"{100 * self.done / self.total:.0f}% of {self.total / 1e6:.1f} MB" if self.total else f"{self.done / 1e6:.1f} MB"
            self.logger.info(f"  downloading {self.label}: {part}")


class HttpSource:
    @staticmethod
    def is_current(spec: InputSpec, index: dict, where: str) -> bool:
        return True  # an https input is fetched once; pin its content with `sha256` to be sure

    @staticmethod
    def download(spec: InputSpec, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
        return _download_http(spec, staging, where, logger)


def _download_http(spec: InputSpec, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
    name = Path(urllib.parse.urlparse(spec.source).path).name or "download"
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


def _s3_objects(spec: InputSpec, where: str):
    try:
        import boto3
        import botocore.exceptions
    except ImportError:  # pragma: no cover - boto3 is a dependency
        raise PreparingError(f"{where}: s3:// inputs need boto3 (pip install boto3)") from None
    parsed = urllib.parse.urlparse(spec.source)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
    client = boto3.client("s3", endpoint_url=spec.endpoint_url)
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        objects = [item for page in pages for item in page.get("Contents", [])]
    except botocore.exceptions.BotoCoreError as exc:
        raise PreparingError(f"{where}: {spec.source}: {exc}") from None
    except botocore.exceptions.ClientError as exc:
        raise PreparingError(f"{where}: {spec.source}: {exc.response['Error'].get('Message') or exc}") from None
    if not objects:
        raise PreparingError(f"{where}: {spec.source}: no such object or prefix")
    return client, bucket, prefix, objects


def _listing(objects) -> dict:
    return {item["Key"]: [item["Size"], item.get("ETag")] for item in objects}


def _download_s3(spec: InputSpec, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
    client, bucket, prefix, objects = _s3_objects(spec, where)
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
        client.download_file(bucket, key, str(target), Callback=progress.add)
    return (Path(prefix).name if single else ""), _listing(objects)


class S3Source:
    @staticmethod
    def is_current(spec: InputSpec, index: dict, where: str) -> bool:
        """Listing the prefix is cheap: download again only when an object changed."""
        return _listing(_s3_objects(spec, where)[3]) == index.get("listing")

    @staticmethod
    def download(spec: InputSpec, staging: Path, where: str, logger: Logger) -> tuple[str, dict]:
        return _download_s3(spec, staging, where, logger)
