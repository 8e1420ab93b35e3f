"""Hostile tftrain-checkpoints.json listings (issue 24, security 1): whoever writes to the sync
bucket gets one StorageError line naming the listing and the fault (exit 18), never a traceback,
a hang, a write outside the checkpoint directory, or a line of their own in TensorFlow's state
file. The parser alone, then the restore against a real S3 API (moto's server)."""

from __future__ import annotations

import hashlib
import json
import time

import boto3
import pytest
from builders import Notes
from hostile import nothing_written_outside

from runner.errors import DiskFullError, StorageError
from runner.training import checkpoints
from runner.training.checkpoint_listing import MAX_BYTES, MAX_CHECKPOINTS, CheckpointKind, parse_listing
from runner.training.checkpoints import MANIFEST, CheckpointSync, Location, latest_checkpoint

WHERE = "s3://bkt/team/demo-1/tftrain-checkpoints.json"
SHA = "a" * 64
TRAVERSAL = '../../../../../../../../tmp/tftrain-hostile/x"\nmodel_checkpoint_path: "/etc/passwd'


def tf_entry(name: str = "ckpt-1", when: object = 1.0, **changes) -> dict:
    entry = {
        "name": name,
        "kind": "tensorflow",
        "time": when,
        "files": {
            f"{name}.data-00000-of-00001": {"size": 1, "sha256": SHA},
            f"{name}.index": {"size": 1, "sha256": SHA},
        },
    }
    return {**entry, **changes}


def listing(*entries: object, **top) -> bytes:
    return json.dumps({"version": 1, "checkpoints": list(entries), **top}).encode()


def one_file(name: str, entry: object) -> dict:
    return tf_entry(files={"ckpt-1.index": {"size": 1, "sha256": SHA}, name: entry})


# (id, the listing's bytes, what its one line names)
REFUSED = [
    ("not-json", b"<html>500</html>", "is not JSON"),
    ("not-utf8", b"\xff\xfe\x00", "is not JSON"),
    ("empty", b"", "is not JSON"),
    ("list-at-the-top", b"[]", "the listing must be a mapping, not a list"),
    ("no-version", json.dumps({"checkpoints": []}).encode(), "has version None"),
    ("no-checkpoints", json.dumps({"version": 1}).encode(), "has no 'checkpoints'"),
    ("checkpoints-a-mapping", listing(checkpoints={"a": 1}), "checkpoints must be a list, not a mapping"),
    ("checkpoint-a-list", listing(["ckpt-1"]), "checkpoints[0] must be a mapping, not a list"),
    ("no-name", listing({k: v for k, v in tf_entry().items() if k != "name"}), "checkpoints[0] has no 'name'"),
    ("name-a-number", listing(tf_entry(name=7)), "checkpoints[0].name 7 must be a string"),
    ("unknown-kind", listing(tf_entry(kind="pickle")), "checkpoints[0].kind 'pickle' is none of"),
    ("string-time", listing(tf_entry(when="yesterday")), "checkpoints[0].time must be a number of seconds"),
    ("bool-time", listing(tf_entry(when=True)), "checkpoints[0].time must be a number of seconds"),
    ("nan-time", listing(tf_entry()).replace(b'"time": 1.0', b'"time": NaN'), "holds NaN, which is not a number"),
    ("huge-time", listing(tf_entry()).replace(b'"time": 1.0', b'"time": ' + b"9" * 4000), "time must be a number"),
    ("files-a-list", listing(tf_entry(files=["ckpt-1.index"])), "checkpoints[0].files must be a mapping, not a list"),
    ("no-files", listing(tf_entry(files={})), "checkpoints[0].files lists 0 files"),
    ("no-sha256", listing(one_file("ckpt-1.data-00000-of-00001", {"size": 1})), "has no 'sha256'"),
    (
        "sha256-a-path",
        listing(one_file("ckpt-1.data-00000-of-00001", {"size": 1, "sha256": "../../x"})),
        "64 lowercase hex",
    ),
    (
        "string-size",
        listing(one_file("ckpt-1.data-00000-of-00001", {"size": "1", "sha256": SHA})),
        "size must be a whole number",
    ),
    (
        "negative-size",
        listing(one_file("ckpt-1.data-00000-of-00001", {"size": -1, "sha256": SHA})),
        "size must be a whole number",
    ),
    ("file-entry-a-list", listing(one_file("ckpt-1.data-00000-of-00001", [1, SHA])), "must be a mapping, not a list"),
    ("traversal-name", listing(tf_entry(name=TRAVERSAL)), "checkpoints[0].name '../../"),
    ("dotdot-name", listing(tf_entry(name="../../../tmp/x")), "must stay inside the checkpoint directory"),
    ("absolute-name", listing(tf_entry(name="/tmp/x")), "is absolute"),
    ("dot-name", listing(tf_entry(name=".")), "has an empty, '.' or '..' part"),
    ("empty-name", listing(tf_entry(name="")), "checkpoints[0].name '' is empty"),
    ("nul-name", listing(tf_entry(name="ckpt\x00-1")), "holds a control character"),
    ("quote-name", listing(tf_entry(name='ckpt"-1')), "a quote"),
    ("line-separator-name", listing(tf_entry(name="ckpt\u2028-1")), "holds a control character"),
    ("2000-level-name", listing(tf_entry(name="/".join(["a"] * 2000))), "is longer than 1024 characters"),
    ("40-level-name", listing(tf_entry(name="/".join(["a"] * 40))), "is 40 levels deep"),
    ("long-part", listing(tf_entry(name="a" * 300)), "has a part longer than 200 bytes"),
    (
        "traversal-file",
        listing(one_file("../../x.index", {"size": 1, "sha256": SHA})),
        "checkpoints[0].files '../../x.index'",
    ),
    (
        "stray-file",
        listing(one_file("other.index", {"size": 1, "sha256": SHA})),
        "must be 'ckpt-1.index' and its .data-K-of-N",
    ),
    (
        "file-over-a-file",
        listing(
            {
                "name": "m.keras",
                "kind": "keras-file",
                "time": 1,
                "files": {"m.keras": {"size": 1, "sha256": SHA}, "m.keras/x": {"size": 1, "sha256": SHA}},
            }
        ),
        "the .keras file 'm.keras' alone",
    ),
    (
        "backup-odd-files",
        listing(
            {
                "name": "b",
                "kind": "keras-backup",
                "time": 1,
                "files": {
                    "a/latest.weights.h5": {"size": 1, "sha256": SHA},
                    "b/training_metadata.json": {"size": 1, "sha256": SHA},
                },
            }
        ),
        "in one directory",
    ),
    ("100000-brackets", b"[" * 100_000 + b"]" * 100_000, "nests over 16 levels deep"),
    ("deep-in-a-value", listing(tf_entry(extra=json.loads("[" * 500 + "]" * 500))), "nests over 16 levels deep"),
    ("over-16-MiB", b" " * (MAX_BYTES + 1), "is over 16 MiB"),
    (
        "16-MiB-of-escaped-quotes",
        b'"' + b'\\"' * (MAX_BYTES // 2 - 1),
        "is not JSON: Unterminated string",
    ),  # was quadratic
    (
        "5-million-strings",
        b'{"version": 1, "checkpoints": [' + b'"",' * 5_000_000 + b'""]}',
        "holds over 2000000 values",
    ),
    (
        "20000-checkpoints",
        listing(*[tf_entry(f"c-{n}", n) for n in range(20_000)]),
        "lists 20000 checkpoints (at most 10000)",
    ),
    (
        "20000-files",
        listing(tf_entry(files={f"ckpt-1.data-{n:05d}-of-20000": {"size": 1, "sha256": SHA} for n in range(20_000)})),
        "lists 20000 files",
    ),
]


@pytest.mark.parametrize("body, names", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_a_hostile_listing_is_one_line_naming_it(body, names):
    started = time.monotonic()
    with pytest.raises(StorageError) as refused:
        parse_listing(body, WHERE)
    line = str(refused.value)
    assert time.monotonic() - started < 20  # a hang, not a slow machine (about 1.5 s at most here)
    assert line.startswith(WHERE + ": ") and names in line, line
    assert "\n" not in line and "\x00" not in line and len(line) < 400, line


def test_a_listing_the_sync_writes_is_read_back_whole():
    backup = {
        "name": "checkpoints",
        "kind": "keras-backup",
        "time": 3,
        "files": {
            "latest.weights.h5": {"size": 2, "sha256": SHA},
            "training_metadata.json": {"size": 3, "sha256": SHA},
        },
    }
    keras = {
        "name": "dir/model.keras",
        "kind": "keras-file",
        "time": 2.5,
        "files": {"dir/model.keras": {"size": 4, "sha256": SHA}},
    }
    read = parse_listing(listing(tf_entry("sub/ckpt-1"), keras, backup, written=1.0), WHERE)
    assert [(c.name, c.kind, c.time, len(c.files)) for c in read] == [
        ("sub/ckpt-1", CheckpointKind.TENSORFLOW, 1.0, 2),
        ("dir/model.keras", CheckpointKind.KERAS_FILE, 2.5, 1),
        ("checkpoints", CheckpointKind.KERAS_BACKUP, 3.0, 2),
    ]
    assert read[0].state_file() == (
        "sub/checkpoint",
        'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n',
    )
    assert read[1].state_file() is None


@pytest.fixture
def bucket(s3_server, aws_env, request):
    s3 = boto3.client("s3", endpoint_url=s3_server)
    name = "hostile-" + request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")[:40].strip("-")
    s3.create_bucket(Bucket=name)
    return s3, name


def put_blob(s3, bucket: str, content: bytes) -> dict:
    digest = hashlib.sha256(content).hexdigest()
    s3.put_object(Bucket=bucket, Key=f"team/demo-1/blobs/{digest}", Body=content)
    return {"size": len(content), "sha256": digest}


def restore(s3_server, bucket: str, destination):
    return latest_checkpoint(f"s3://{bucket}/team/demo-1", destination, endpoint_url=s3_server)


def test_a_traversal_name_writes_nothing_anywhere(tmp_path, bucket, s3_server):
    s3, name = bucket
    blob = put_blob(s3, name, b"weights")
    escape = '../../escaped/x"\nall_model_checkpoint_paths: "/etc/passwd'  # from the staging directory to tmp_path
    hostile = [
        tf_entry(escape, files={"ckpt-1.index": blob}),  # files fine, the name (the state file's place and line) not
        {"name": "../../escaped/m.keras", "kind": "keras-file", "time": 1, "files": {"../../escaped/m.keras": blob}},
        {
            "name": "b",
            "kind": "keras-backup",
            "time": 1,
            "files": {f"../../escaped/{f}": blob for f in ("latest.weights.h5", "training_metadata.json")},
        },
        tf_entry(files={"ckpt-1.index": blob, "../../escaped.data-00000-of-00001": blob}),
    ]
    for entry in hostile:
        s3.put_object(Bucket=name, Key=f"team/demo-1/{MANIFEST}", Body=listing(entry))
        with nothing_written_outside(tmp_path), pytest.raises(StorageError) as refused:
            restore(s3_server, name, tmp_path / "run" / "resume")
        assert str(refused.value).startswith(f"s3://{name}/team/demo-1/{MANIFEST}: checkpoints[0]."), refused.value
        assert "\n" not in str(refused.value)


def test_a_size_mismatch_names_the_listing(tmp_path, bucket, s3_server):
    s3, name = bucket
    blob = put_blob(s3, name, b"weights")
    s3.put_object(
        Bucket=name, Key=f"team/demo-1/{MANIFEST}", Body=listing(tf_entry(files={"ckpt-1.index": {**blob, "size": 99}}))
    )
    with nothing_written_outside(tmp_path), pytest.raises(StorageError) as refused:
        restore(s3_server, name, tmp_path / "resume")
    line = str(refused.value)
    assert line.startswith(f"s3://{name}/team/demo-1/{MANIFEST}, file ckpt-1.index: "), line
    assert "does not match the listing (size or sha256)" in line and "model.s3.json" not in line


def test_a_checkpoint_the_disk_cannot_hold_is_refused_before_fetching(tmp_path, bucket, s3_server):
    s3, name = bucket
    blob = put_blob(s3, name, b"weights")
    huge = {**blob, "size": 2**62}
    s3.put_object(
        Bucket=name,
        Key=f"team/demo-1/{MANIFEST}",
        Body=listing(tf_entry(files={"ckpt-1.index": blob, "ckpt-1.data-00000-of-00001": huge})),
    )
    with nothing_written_outside(tmp_path), pytest.raises(DiskFullError) as refused:
        restore(s3_server, name, tmp_path / "resume")
    assert str(refused.value).startswith(
        f"s3://{name}/team/demo-1/{MANIFEST}: checkpoint ckpt-1 is {2**62 + 7} bytes, "
    ), refused.value


def test_an_oversized_listing_is_refused_after_reading_its_limit(tmp_path, bucket, s3_server):
    s3, name = bucket
    s3.put_object(Bucket=name, Key=f"team/demo-1/{MANIFEST}", Body=b" " * (MAX_BYTES + 4096))
    with pytest.raises(StorageError, match=r"tftrain-checkpoints\.json: is over 16 MiB$"):
        restore(s3_server, name, tmp_path / "resume")
    assert not (tmp_path / "resume").exists()


def test_a_long_listing_fetches_the_latest_checkpoint_only(tmp_path, bucket, s3_server):
    s3, name = bucket
    old = {"size": 1, "sha256": "0" * 64}  # never uploaded: fetching any of them would fail
    entries = [tf_entry(f"ckpt-{n}", float(n), files={f"ckpt-{n}.index": old}) for n in range(MAX_CHECKPOINTS - 1)]
    latest = put_blob(s3, name, b"the latest")
    entries.insert(17, tf_entry("ckpt-new", 1e9, files={"ckpt-new.index": latest}))
    s3.put_object(Bucket=name, Key=f"team/demo-1/{MANIFEST}", Body=listing(*entries))
    started = time.monotonic()
    back = restore(s3_server, name, tmp_path / "resume")
    assert time.monotonic() - started < 20
    assert sorted(p.name for p in back.iterdir()) == ["checkpoint", "ckpt-new.index"]
    assert (back / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-new"\n')


def test_the_sync_leaves_out_what_a_reader_would_refuse(tmp_path, bucket, s3_server):
    s3, name = bucket
    root = tmp_path / "ckpt"
    root.mkdir()
    for prefix in ('odd"name', "ckpt-1"):
        (root / f"{prefix}.data-00000-of-00001").write_bytes(b"data " + prefix.encode())
        (root / f"{prefix}.index").write_bytes(b"index")
    notes = Notes()
    sync = CheckpointSync(root, Location(name, "team/demo-1", s3_server), 60, notes)
    assert sync.sync() is True
    sync.sync()
    assert notes.warnings == [
        "checkpoints: not synced, a run could not resume from it: checkpoint.name 'odd\"name' holds a control"
        " character, a line break, a quote or a backslash"
    ]
    back = restore(s3_server, name, tmp_path / "resume")
    assert sorted(p.name for p in back.iterdir()) == ["checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index"]


def test_the_sync_keeps_its_listing_within_what_a_reader_accepts(monkeypatch):
    monkeypatch.setattr(checkpoints, "MAX_BYTES", 4096)
    entries = [
        {"name": f"ckpt-{n}", "kind": "tensorflow", "time": n, "files": {f"ckpt-{n}.index": {"size": 1, "sha256": SHA}}}
        for n in range(100)
    ]
    kept, body = checkpoints._fitting(entries)
    assert len(body) <= 4096 and kept == entries[-len(kept) :] and len(kept) >= 10
    assert [c.name for c in parse_listing(body, WHERE)] == [e["name"] for e in kept]
