"""Large models go to S3 (or an S3-compatible store) with boto3's multipart transfers; the
release then carries `model.s3.json`: where the object is, its size and its sha256."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from runner.checksums import sha256_file
from runner.errors import StorageError

GITHUB_ASSET_LIMIT = 2 * 1024**3
PART = 16 * 1024**2  # four parts in flight: 64 MB of buffers at most


@dataclass(frozen=True)
class S3Target:
    bucket: str | None
    prefix: str = ""
    endpoint_url: str | None = None
    threshold: int = GITHUB_ASSET_LIMIT

    @classmethod
    def from_env(cls) -> S3Target:
        return cls(
            bucket=os.environ.get("INPUT_S3_BUCKET") or None,
            prefix=os.environ.get("INPUT_S3_PREFIX", "").strip("/"),
            endpoint_url=os.environ.get("INPUT_S3_ENDPOINT_URL") or None,
            threshold=int(os.environ.get("TFTRAIN_S3_THRESHOLD_BYTES", GITHUB_ASSET_LIMIT)),
        )

    def offload(self, size: int) -> bool:
        """Whether a model of `size` bytes goes to S3: when a bucket is set, or when it must."""
        if self.bucket is None and size > self.threshold:
            raise StorageError(
                f"model.tar.gz is {size / 1024**3:.2f} GiB, over GitHub's release asset limit: set s3-bucket "
                "(and s3-endpoint-url for an S3-compatible store) to publish it to S3"
            )
        return self.bucket is not None


def s3_client(endpoint_url: str | None):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint_url)


def _transfer():
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4, use_threads=True)


def upload(target: S3Target, path: Path, key: str, digest: str | None = None) -> dict:
    """Upload `path` (whose sha256 is `digest`, when the caller knows it) to
    s3://bucket/prefix/key, check what landed, return the pointer."""
    import botocore.exceptions

    digest, size = digest or sha256_file(path), path.stat().st_size
    full_key = f"{target.prefix}/{key}" if target.prefix else key
    client = s3_client(target.endpoint_url)
    try:
        client.upload_file(str(path), target.bucket, full_key, ExtraArgs={"Metadata": {"sha256": digest}}, Config=_transfer())
        head = client.head_object(Bucket=target.bucket, Key=full_key)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise StorageError(f"uploading the model to s3://{target.bucket}/{full_key}: {exc}") from None
    if head["ContentLength"] != size or head.get("Metadata", {}).get("sha256") != digest:
        raise StorageError(f"s3://{target.bucket}/{full_key} does not match the uploaded model")
    return {"uri": f"s3://{target.bucket}/{full_key}", "size": size, "sha256": digest, "endpoint_url": target.endpoint_url}


def download(pointer: dict, path: Path) -> None:
    """Fetch what a model.s3.json points to, and check it against the pointer's sha256."""
    import botocore.exceptions

    bucket, _, key = pointer["uri"][len("s3://") :].partition("/")
    endpoint = S3Target.from_env().endpoint_url or pointer.get("endpoint_url")
    try:
        s3_client(endpoint).download_file(bucket, key, str(path), Config=_transfer())
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise StorageError(f"downloading {pointer['uri']}: {exc}") from None
    if path.stat().st_size != pointer["size"] or sha256_file(path) != pointer["sha256"]:
        raise StorageError(f"{pointer['uri']} does not match its model.s3.json (size or sha256)")


def pointer_text(pointer: dict) -> str:
    return json.dumps(pointer, indent=2, sort_keys=True) + "\n"
