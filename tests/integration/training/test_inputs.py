"""Inputs from a real S3 API (moto's server) and a real HTTP server, cached by content."""

from __future__ import annotations

import gzip
import hashlib
import json
import struct

import boto3
import pytest

pytestmark = pytest.mark.integration

READER = """\
import gzip, os, struct, sys
data = sys.argv[2]
with gzip.open(os.path.join(data, "train-images-idx3-ubyte.gz")) as f:
    magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
print("images", magic, count, rows, cols)
print("labels", open(sys.argv[4], "rb").read()[:8].hex())
try:
    open(os.path.join(data, "new-file"), "w").write("x")
    print("data is writable")
except OSError as exc:
    print("data is read-only", type(exc).__name__)
"""


def idx_images(count: int) -> bytes:
    return gzip.compress(struct.pack(">IIII", 2051, count, 28, 28) + bytes(count * 28 * 28))


@pytest.fixture
def datasets(s3_server, aws_env, http_server):
    s3 = boto3.client("s3", endpoint_url=s3_server)
    bucket = "data-" + hashlib.sha256(str(id(s3)).encode()).hexdigest()[:8]
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="mnist/train-images-idx3-ubyte.gz", Body=idx_images(60))
    s3.put_object(Bucket=bucket, Key="mnist/nested/readme.txt", Body=b"digits")
    root, base_url = http_server
    (root / "labels.bin").write_bytes(bytes(range(16)))
    return s3, bucket, base_url


def manifest(bucket: str, s3_server: str, base_url: str, extra: str = "") -> str:
    return (
        "inputs:\n"
        f"  mnist:\n    source: s3://{bucket}/mnist\n    endpoint_url: {s3_server}\n"
        f"  labels:\n    source: {base_url}/labels.bin\n    sha256: {hashlib.sha256(bytes(range(16))).hexdigest()}\n"
        "script_params:\n  --data-folder: {input: mnist}\n  --labels: {input: labels}\n" + extra
    )


def test_remote_inputs_download_once_and_reach_the_script(project, cli, home, datasets, s3_server):
    s3, bucket, base_url = datasets
    path = project(script=READER, manifest=manifest(bucket, s3_server, base_url))
    first = cli("run", "-f", str(path))
    assert first.returncode == 0, first.stdout + first.stderr
    log = (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert "images 2051 60 28 28" in log and "labels 0001020304050607" in log
    assert "inputs.mnist.source: s3://" in first.stdout and "(cached" not in first.stdout

    second = cli("run", "-f", str(path))
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("(cached, sha256") == 2

    s3.put_object(Bucket=bucket, Key="mnist/train-images-idx3-ubyte.gz", Body=idx_images(70))
    third = cli("run", "-f", str(path))
    assert third.returncode == 0, third.stderr
    assert "images 2051 70 28 28" in (home / "runs/demo-3/workdir/logs/0.log").read_text()
    assert third.stdout.count("(cached, sha256") == 1  # the https input; the changed prefix came again


def test_inputs_are_mounted_read_only_in_docker(project, cli, home, datasets, s3_server, docker_client, repo):
    from conftest import BASE_IMAGE

    s3, bucket, base_url = datasets
    docker = (
        f"use_docker: true\ncustom_docker_image: {BASE_IMAGE}\nframework_version: '2.18'\npip_packages:"
        " [scikit-learn]\n"
    )
    # tftrain downloads on the host; the container only sees the cached copy, mounted
    path = project(script=READER, manifest=manifest(bucket, s3_server, base_url, docker))
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    log = (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert "images 2051 60 28 28" in log
    assert "data is read-only" in log
    lock = (home / "runs/demo-1/manifest.lock.yml").read_text()
    assert "target: /tftrain/inputs/mnist" in lock


def test_missing_inputs_name_the_url(project, cli, home, datasets, s3_server):
    s3, bucket, base_url = datasets
    result = cli("run", "-f", str(project(manifest=f"inputs:\n  x:\n    source: {base_url}/nope.bin\n")))
    assert result.returncode == 4
    assert f"inputs.x.source: {base_url}/nope.bin: HTTP 404" in result.stderr
    result = cli(
        "run",
        "-f",
        str(project(manifest=f"inputs:\n  x:\n    source: s3://{bucket}/absent\n    endpoint_url: {s3_server}\n")),
    )
    assert result.returncode == 4
    assert f"inputs.x.source: s3://{bucket}/absent: no such object or prefix" in result.stderr


def test_checksum_mismatch_is_refused(project, cli, home, datasets):
    _, _, base_url = datasets
    result = cli(
        "run",
        "-f",
        str(project(manifest=f"inputs:\n  x:\n    source: {base_url}/labels.bin\n    sha256: '{'0' * 64}'\n")),
    )
    assert result.returncode == 4
    assert "has sha256" in result.stderr and "but the manifest expects 000000" in result.stderr
    runs = json.loads((home / "runs/demo-1/run.json").read_text())
    assert runs["status"] == "Failed"


def test_a_changed_prefix_is_listed_once_and_its_digest_is_known(project, home, datasets, s3_server, monkeypatch):
    import io

    from runner.manifest import load_manifest
    from runner.telemetry.logger import Logger
    from runner.training import downloads, inputs

    s3, bucket, base_url = datasets
    loaded = load_manifest(project(manifest=manifest(bucket, s3_server, base_url)))
    listings = []
    listing = downloads._s3_listing
    monkeypatch.setattr(
        downloads, "_s3_listing", lambda spec, where: listings.append(spec.source) or listing(spec, where)
    )
    counts = []
    for body in (idx_images(60), idx_images(60), idx_images(80)):
        s3.put_object(Bucket=bucket, Key="mnist/train-images-idx3-ubyte.gz", Body=body)
        listings.clear()
        paths = inputs.fetch_inputs(loaded, Logger(io.StringIO()))
        counts.append(len(listings))
    assert counts == [1, 1, 1]  # the stale third fetch downloads with the listing it compared
    digests = {name: inputs.digest_of(path) for name, path in paths.items()}
    assert digests == {"mnist": paths["mnist"].name, "labels": hashlib.sha256(bytes(range(16))).hexdigest()}
    assert paths["labels"].parent.name == digests["labels"]
    files = sorted(p for p in paths["mnist"].rglob("*") if p.is_file())
    listing = "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(paths['mnist']).as_posix()}\n" for p in files
    )
    assert hashlib.sha256(listing.encode()).hexdigest() == digests["mnist"]  # a directory: the sha256 of its SHA256SUMS
