"""The checkpoint sync against a real S3 API (moto's server, in this process): only complete
checkpoints are named, the manifest comes last, and a file that changes while it is copied waits."""

from __future__ import annotations

import hashlib
import json
import socket
import zipfile

import boto3
import pytest
from builders import Notes

from runner.errors import StorageError
from runner.training import checkpoints
from runner.training.checkpoints import (
    MANIFEST,
    CheckpointKind,
    CheckpointSync,
    Location,
    find_checkpoints,
    latest_checkpoint,
)


@pytest.fixture
def bucket(s3_server, aws_env, request):
    s3 = boto3.client("s3", endpoint_url=s3_server)
    name = "ckpt-" + request.node.name.lower().replace("_", "-")[:40]
    s3.create_bucket(Bucket=name)
    return s3, name


def tf_checkpoint(root, prefix: str, content: bytes, shards: int = 1) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        (root / f"{prefix}.data-{shard:05d}-of-{shards:05d}").write_bytes(content + bytes([shard]))
    (root / f"{prefix}.index").write_bytes(b"index of " + prefix.encode())
    (root / "checkpoint").write_text(f'model_checkpoint_path: "{prefix}"\n')


def listed(s3, bucket: str, prefix: str = "runs/demo-1") -> dict:
    return json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/{MANIFEST}")["Body"].read())


def test_only_complete_checkpoints_are_found(tmp_path):
    tf_checkpoint(tmp_path / "tf", "ckpt-1", b"one", shards=2)
    (tmp_path / "tf" / "ckpt-2.index").write_bytes(b"shards missing")
    (tmp_path / "tf" / "ckpt-3.data-00000-of-00001").write_bytes(b"no index yet")
    backup = tmp_path / "backup"
    backup.mkdir()
    (backup / "training_metadata.json").write_text('{"epoch": 1}')
    (backup / "latest.weights.h5").write_bytes(b"rewritten after the metadata")
    (tmp_path / "half.keras").write_bytes(b"PK not a zip")
    with zipfile.ZipFile(tmp_path / "whole.keras", "w") as archive:
        archive.writestr("config.json", "{}")
    found = {(c.name, c.kind) for c in find_checkpoints(tmp_path)}
    assert found == {("tf/ckpt-1", CheckpointKind.TENSORFLOW), ("whole.keras", CheckpointKind.KERAS_FILE)}
    (backup / "training_metadata.json").write_text('{"epoch": 2}')  # written after the weights: complete
    backups = [c for c in find_checkpoints(tmp_path) if c.kind is CheckpointKind.KERAS_BACKUP]
    assert [(c.name, c.files) for c in backups] == [
        ("backup", ("backup/latest.weights.h5", "backup/training_metadata.json"))
    ]
    tf = next(c for c in find_checkpoints(tmp_path) if c.kind is CheckpointKind.TENSORFLOW)
    assert tf.files == ("tf/ckpt-1.data-00000-of-00002", "tf/ckpt-1.data-00001-of-00002", "tf/ckpt-1.index")


def test_sync_then_the_latest_comes_back(tmp_path, bucket, s3_server):
    s3, name = bucket
    root = tmp_path / "ckpt"
    sync = CheckpointSync(root, Location(name, "runs/demo-1", s3_server), 60, Notes())
    assert sync.sync() is False  # nothing yet: no manifest
    assert latest_checkpoint(f"s3://{name}/runs/demo-1", tmp_path / "none", endpoint_url=s3_server) is None
    tf_checkpoint(root, "ckpt-1", b"first")
    assert sync.sync() is True
    tf_checkpoint(root, "ckpt-2", b"second")
    assert sync.sync() is True
    assert sync.sync() is False  # nothing changed: nothing written
    names = [item["name"] for item in listed(s3, name)["checkpoints"]]
    assert names == ["ckpt-1", "ckpt-2"]
    back = latest_checkpoint(f"s3://{name}/runs/demo-1", tmp_path / "resume", endpoint_url=s3_server)
    assert sorted(p.name for p in back.iterdir()) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert (back / "ckpt-2.data-00000-of-00001").read_bytes() == b"second\x00"
    assert (back / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-2"')


def test_blobs_no_manifest_names_are_removed(tmp_path, bucket, s3_server):
    s3, name = bucket
    root = tmp_path / "ckpt"
    sync = CheckpointSync(root, Location(name, "runs/demo-1", s3_server), 60, Notes())
    for step in range(1, 5):  # CheckpointManager(max_to_keep=1): one on disk at a time
        for old in root.glob("ckpt-*") if root.exists() else ():
            old.unlink()
        tf_checkpoint(root, f"ckpt-{step}", f"step {step}".encode())
        sync.sync()
    blobs = {item["Key"] for item in s3.list_objects_v2(Bucket=name, Prefix="runs/demo-1/blobs/")["Contents"]}
    assert len(blobs) == 4  # this manifest's two files, and the previous one's (a reader may be fetching them)


def test_a_file_that_changes_while_it_is_copied_waits_for_the_next_round(tmp_path, bucket, s3_server, monkeypatch):
    s3, name = bucket
    root = tmp_path / "ckpt"
    tf_checkpoint(root, "ckpt-1", b"first")
    sync = CheckpointSync(root, Location(name, "runs/demo-1", s3_server), 60, Notes(), staging=tmp_path)
    sync.sync()
    tf_checkpoint(root, "ckpt-2", b"second")
    real_copy = checkpoints.sha256_file

    def growing(path, copy=None):
        digest = real_copy(path, copy)
        if path.name.startswith("ckpt-2.data"):
            with path.open("ab") as handle:  # the trainer still writing
                handle.write(b"more")
        return digest

    monkeypatch.setattr(checkpoints, "sha256_file", growing)
    assert sync.sync() is False
    assert [item["name"] for item in listed(s3, name)["checkpoints"]] == ["ckpt-1"]
    monkeypatch.setattr(checkpoints, "sha256_file", real_copy)
    assert sync.sync() is True
    latest = listed(s3, name)["checkpoints"][-1]
    assert latest["files"]["ckpt-2.data-00000-of-00001"]["size"] == len(b"second\x00more")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no copy left beside


def test_a_file_rewritten_during_its_upload_is_listed_as_it_was_copied(tmp_path, bucket, s3_server, monkeypatch):
    """The upload reads the copy: a training that rewrites its checkpoint each epoch faster than an
    upload takes (a loaded machine, a slow bucket) still gets every round synced."""
    s3, name = bucket
    root = tmp_path / "ckpt"
    tf_checkpoint(root, "ckpt-1", b"first")
    sync = CheckpointSync(root, Location(name, "runs/demo-1", s3_server), 60, Notes())
    real_upload = checkpoints.upload

    def rewriting(target, path, key, digest):
        (root / "ckpt-1.data-00000-of-00001").write_bytes(b"the next epoch, longer")
        real_upload(target, path, key, digest)

    monkeypatch.setattr(checkpoints, "upload", rewriting)
    assert sync.sync() is True
    entry = listed(s3, name)["checkpoints"][-1]["files"]["ckpt-1.data-00000-of-00001"]
    body = s3.get_object(Bucket=name, Key=f"runs/demo-1/blobs/{entry['sha256']}")["Body"].read()
    assert body == b"first\x00" and entry["size"] == len(body) and hashlib.sha256(body).hexdigest() == entry["sha256"]


def test_an_unusable_bucket_is_one_line_before_the_training(tmp_path, s3_server, aws_env):
    with pytest.raises(StorageError) as missing:
        CheckpointSync(tmp_path, Location("no-such-bucket", "p", s3_server), 1, Notes()).check()
    assert str(missing.value) == f"S3: HeadBucket s3://no-such-bucket/p (endpoint {s3_server}) answered 404 Not Found"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(StorageError) as down:
        CheckpointSync(tmp_path, Location("bkt", "p", f"http://127.0.0.1:{port}"), 1, Notes()).check()
    assert (
        str(down.value)
        == f"S3: checking s3://bkt/p (endpoint http://127.0.0.1:{port}) got no answer: Connection refused"
    )


def test_a_failed_round_is_a_warning_and_the_last_round_runs_at_the_end(tmp_path, bucket, s3_server):
    s3, name = bucket
    root = tmp_path / "ckpt"
    notes = Notes()
    tf_checkpoint(root, "ckpt-1", b"first")
    broken = CheckpointSync(root, Location("gone-bucket", "runs/demo-1", s3_server), 0.05, notes)
    with broken:
        pass
    assert len(notes.warnings) >= 1 and all(
        w.startswith("checkpoints: sync to s3://gone-bucket/runs/demo-1 failed: S3:") for w in notes.warnings
    )
    with CheckpointSync(root, Location(name, "runs/demo-1", s3_server), 3600, notes):
        pass  # no round in the block: the one at the end
    assert [item["name"] for item in listed(s3, name)["checkpoints"]] == ["ckpt-1"]
    assert notes.infos[-1] == f"checkpoints: s3://{name}/runs/demo-1 holds 1 complete, the latest ckpt-1"


def test_the_checkpoint_directory_starts_with_what_a_retry_resumes_from(project, tmp_path):
    from runner.history.rundir import RunPaths
    from runner.manifest import load_manifest

    loaded = load_manifest(project(manifest="checkpoints: {dir: outputs/ckpt, sync_to: 's3://bucket/p'}\n"))
    paths = RunPaths(tmp_path / "runs" / "demo-2")
    previous = tmp_path / "runs" / "demo-1" / "workdir" / "outputs" / "ckpt"

    def seed(resume_from):
        return checkpoints._seed(
            loaded._replace(manifest=loaded.manifest.model_copy(update={"resume_from": resume_from})), paths
        )

    assert seed("checkpoint:demo-1") == paths.root / "resume"
    assert seed(str(previous)) == previous  # a retry's fallback: the previous attempt's own directory
    assert seed(str(previous.parent)) is None and seed(str(tmp_path / "elsewhere" / "outputs" / "ckpt")) is None
    assert seed("model:demo@v1") is None and seed(None) is None
