"""S3 through one door (runner.storage.s3.Bucket), against moto's real S3 API: every call tftrain
makes of a bucket, and every failure one StorageError naming the call and the object."""

from __future__ import annotations

import socket

import pytest

from runner.errors import StorageError
from runner.storage.s3 import Bucket


@pytest.fixture
def bucket(s3_server, aws_env):
    made = Bucket("tftrain-test", s3_server)
    made._client().create_bucket(Bucket=made.name)
    return made


def test_put_read_list_fetch_and_delete(bucket, tmp_path):
    bucket.check()
    bucket.put("p/a.json", b'{"a": 1}', "application/json")
    bucket.put("p/b.bin", b"\x00" * 10)
    assert bucket.read("p/a.json", 100) == b'{"a": 1}'
    assert bucket.read("p/missing", 100) is None  # no such object: None, not an error
    assert [(item["Key"], item["Size"]) for item in bucket.listing("p/")] == [("p/a.json", 8), ("p/b.bin", 10)]
    seen = []
    bucket.fetch("p/b.bin", tmp_path / "b.bin", seen.append)
    assert (tmp_path / "b.bin").read_bytes() == b"\x00" * 10 and sum(seen) == 10
    bucket.delete("p/a.json")
    assert [item["Key"] for item in bucket.listing("p/")] == ["p/b.bin"]


def test_a_read_stops_one_byte_past_its_limit(bucket):
    bucket.put("big", b"x" * 1000)
    assert bucket.read("big", 10) == b"x" * 11  # the caller tells "too long" by the extra byte, nothing more is read


def test_failures_are_one_line_naming_the_call_and_the_object(s3_server, aws_env, tmp_path):
    missing = Bucket("no-such-bucket", s3_server)
    with pytest.raises(StorageError) as caught:
        missing.check("s3://no-such-bucket/prefix")
    assert (
        str(caught.value) == f"S3: HeadBucket s3://no-such-bucket/prefix (endpoint {s3_server}) answered 404 Not Found"
    )
    with pytest.raises(StorageError, match=r"^S3: ListObjectsV2 s3://no-such-bucket/p answered 404 NoSuchBucket$"):
        missing.listing("p")
    with pytest.raises(StorageError, match=r"^S3: PutObject s3://no-such-bucket/k answered 404 NoSuchBucket$"):
        missing.put("k", b"1")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    down = Bucket("b", f"http://127.0.0.1:{port}")
    with pytest.raises(StorageError) as caught:
        down.read("k", 10)
    assert str(caught.value) == "S3: reading s3://b/k got no answer: Connection refused" and "\n" not in str(
        caught.value
    )
