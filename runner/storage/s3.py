"""S3 (or an S3-compatible store) through boto3's multipart transfers, every failure one line.
Large models go here instead of into a release, which then carries `model.s3.json`: where the
object is, its size and its sha256 (runner.github.release_assets); checkpoint buckets
(runner.training.checkpoints) and s3:// inputs (runner.training.downloads) reach their buckets
only through Bucket, here: one client, one way of saying what failed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from runner.errors import StorageError, answered, extra_module, one_line, unreachable
from runner.history.checksums import sha256_file
from runner.settings import GITHUB_ASSET_LIMIT, Settings

PART = 16 * 1024**2  # four parts in flight: 64 MB of buffers at most


@dataclass(frozen=True)
class S3Target:
    bucket: str | None
    prefix: str = ""
    endpoint_url: str | None = None
    threshold: int = GITHUB_ASSET_LIMIT

    @classmethod
    def of(cls, settings: Settings) -> S3Target:
        inputs = settings.inputs
        return cls(inputs.s3_bucket, inputs.s3_prefix, inputs.s3_endpoint_url, settings.s3_threshold_bytes)

    def offload(self, size: int) -> bool:
        """Whether a model of `size` bytes goes to S3: when a bucket is set, or when it must."""
        if self.bucket is None and size > self.threshold:
            raise StorageError(
                f"model.tar.gz is {size / 1024**3:.2f} GiB, over GitHub's release asset limit: set s3-bucket "
                "(and s3-endpoint-url for an S3-compatible store) to publish it to S3"
            )
        return self.bucket is not None


def s3_client(endpoint_url: str | None):
    boto3 = extra_module("boto3", "s3", "S3 storage")

    return boto3.client("s3", endpoint_url=endpoint_url)


@dataclass(frozen=True)
class Bucket:
    """One bucket (of an S3-compatible store at `endpoint_url`), through the calls tftrain makes of
    it: every failure is one StorageError naming the call, the object and S3's answer."""

    name: str
    endpoint_url: str | None = None

    def uri(self, key: str = "") -> str:
        return f"s3://{self.name}/{key}" if key else f"s3://{self.name}"

    @cached_property
    def _client_of(self):
        return s3_client(self.endpoint_url)  # one client per bucket: making one costs tens of milliseconds

    def _client(self):
        return self._client_of

    def check(self, where: str | None = None) -> None:
        """That it exists and answers: no such bucket, refused, or no answer; the error names `where`
        (the prefix the caller will use, say) or the bucket."""
        at = f" (endpoint {self.endpoint_url})" if self.endpoint_url else ""
        with s3_errors("checking", (where or self.uri()) + at):
            self._client().head_bucket(Bucket=self.name)

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        with s3_errors("writing", self.uri(key)):
            self._client().put_object(Bucket=self.name, Key=key, Body=body, ContentType=content_type)

    def read(self, key: str, max_bytes: int) -> bytes | None:
        """The object `key` (at most max_bytes + 1 bytes are read: one more than allowed tells the
        caller it is too long), or None when there is no such object."""
        botocore = extra_module("botocore.exceptions", "s3", "S3 storage")
        with s3_errors("reading", self.uri(key)):
            try:
                answer = self._client().get_object(Bucket=self.name, Key=key)
            except botocore.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                    raise
                return None
            try:
                return answer["Body"].read(max_bytes + 1)
            finally:
                answer["Body"].close()

    def delete(self, key: str) -> None:
        with s3_errors("deleting", self.uri(key)):
            self._client().delete_object(Bucket=self.name, Key=key)

    def listing(self, prefix: str) -> list[dict]:
        """Every object under `prefix` (Key, Size, ETag), all pages."""
        with s3_errors("listing", self.uri(prefix)):
            pages = self._client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
            return [item for page in pages for item in page.get("Contents", [])]

    def fetch(self, key: str, target: Path, progress=None) -> None:
        """The object `key` into the file `target` (boto3's multipart transfer; `progress(bytes)` as it goes)."""
        with s3_errors("downloading", self.uri(key)):
            self._client().download_file(self.name, key, str(target), Callback=progress, Config=_transfer())


def _transfer():
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4, use_threads=True)


def upload(target: S3Target, path: Path, key: str, digest: str | None = None) -> dict:
    """Upload `path` (whose sha256 is `digest`, when the caller knows it) to
    s3://bucket/prefix/key, check what landed, return the pointer."""
    digest, size = digest or sha256_file(path), path.stat().st_size
    full_key = f"{target.prefix}/{key}" if target.prefix else key
    uri = f"s3://{target.bucket}/{full_key}"
    client = s3_client(target.endpoint_url)
    with s3_errors("uploading", uri):
        client.upload_file(
            str(path), target.bucket, full_key, ExtraArgs={"Metadata": {"sha256": digest}}, Config=_transfer()
        )
        head = client.head_object(Bucket=target.bucket, Key=full_key)
    if head["ContentLength"] != size or head.get("Metadata", {}).get("sha256") != digest:
        raise StorageError(f"{uri} does not match the uploaded model")
    return {"uri": uri, "size": size, "sha256": digest, "endpoint_url": target.endpoint_url}


def download(pointer: dict, path: Path, endpoint_url: str | None = None, source: str = "its model.s3.json") -> None:
    """Fetch what a model.s3.json points to, and check it against the pointer's sha256.
    `endpoint_url` (the input s3-endpoint-url) overrides the one the pointer was made with;
    `source` is what the pointer came from, named when the object does not match it. An object
    of another size than the pointer's is never fetched: a pointer may not fill the disk."""
    bucket, _, key = pointer["uri"][len("s3://") :].partition("/")
    endpoint = endpoint_url or pointer.get("endpoint_url")
    client = s3_client(endpoint)
    with s3_errors("downloading", pointer["uri"]):
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        if size == pointer["size"]:
            client.download_file(bucket, key, str(path), Config=_transfer())
    if size != pointer["size"] or sha256_file(path) != pointer["sha256"]:
        raise StorageError(f"{pointer['uri']} does not match {source} (size or sha256)")


@contextmanager
def s3_errors(doing: str, uri: str) -> Iterator[None]:
    """Turn what boto3 raises while `doing` something with `uri` into a StorageError: one line
    naming the call and S3's answer, `S3: PutObject s3://bucket/key answered 500 InternalError`."""
    botocore = extra_module("botocore.exceptions", "s3", "S3 storage")
    from boto3.exceptions import Boto3Error
    from s3transfer.exceptions import RetriesExceededError

    try:
        yield
    except (
        botocore.exceptions.BotoCoreError,
        botocore.exceptions.ClientError,
        Boto3Error,
        RetriesExceededError,
    ) as exc:
        raise StorageError(s3_failure(exc, doing, uri)) from None


def s3_failure(exc: BaseException, doing: str, uri: str) -> str:
    import botocore.exceptions

    answer = next(
        (e for e in (exc, exc.__cause__, exc.__context__) if isinstance(e, botocore.exceptions.ClientError)), None
    )
    if answer is not None:  # boto3's transfers wrap it (S3UploadFailedError)
        status = answer.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = answer.response.get("Error", {}).get("Code")
        return answered("S3", f"{answer.operation_name} {uri}", status, reason=None if code == str(status) else code)
    failed = getattr(exc, "last_exception", None) or exc  # s3transfer's RetriesExceededError
    if isinstance(failed, (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError)):
        return unreachable("S3", f"{doing} {uri}", failed)
    return f"S3: {doing} {uri}: {one_line(str(failed))}"


def pointer_text(pointer: dict) -> str:
    return json.dumps(pointer, indent=2, sort_keys=True) + "\n"
