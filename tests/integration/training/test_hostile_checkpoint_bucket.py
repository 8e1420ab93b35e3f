"""`resume_from: checkpoint:RUN` against a sync bucket someone else wrote to (issue 24, security 1):
through the real CLI, each hostile tftrain-checkpoints.json is one `tftrain: error:` line naming
the listing, exit 18, in bounded time, nothing written outside TFTRAIN_HOME, no credential shown."""

from __future__ import annotations

import hashlib
import json

import boto3
import pytest
from hostile import assert_refused, files_containing, nothing_written_outside

from runner.errors import StorageError

pytestmark = pytest.mark.integration

SECRET = "hostile-ckpt-secret-3f9a1c"  # moto takes any key: this one must show up nowhere
LISTING = "s3://ckpt-hostile/team/demo-1/tftrain-checkpoints.json"
MANIFEST = (
    "checkpoints:\n  dir: outputs/checkpoints\n  sync_to: s3://ckpt-hostile/team\n  every_seconds: 1\n  endpoint_url:"
    " {endpoint}\nmodel: {{register: false}}\n"
)
INJECTED = 'x"\nall_model_checkpoint_paths: "/etc/passwd'


def tf_entry(name: str, files: dict, when: float = 1.0) -> dict:
    return {"name": name, "kind": "tensorflow", "time": when, "files": files}


def listing(*entries: dict) -> bytes:
    return json.dumps({"version": 1, "checkpoints": list(entries)}).encode()


def cases(blob: dict) -> list[tuple[str, bytes, str]]:
    """(id, listing, what the one line names after the listing); the state file's directory is
    home/runs/demo-N/resume, so ../../../../ is the test's own tmp_path."""
    escape = "../../../../escaped/" + INJECTED
    return [
        (
            "traversal-name",
            listing(tf_entry(escape, {"ckpt-1.index": blob})),
            "checkpoints[0].name '../../../../escaped/x\"\\nall_model",
        ),
        (
            "traversal-keras",
            listing(
                {
                    "name": "../../../../escaped/m.keras",
                    "kind": "keras-file",
                    "time": 1,
                    "files": {"../../../../escaped/m.keras": blob},
                }
            ),
            "must stay inside",
        ),
        ("not-json", b"<Error>SlowDown</Error>", "is not JSON"),
        ("100000-brackets", b"[" * 100_000 + b"]" * 100_000, "nests over 16 levels deep"),
        (
            "20000-entries",
            listing(*[tf_entry(f"c-{n}", {f"c-{n}.index": blob}, n) for n in range(20_000)]),
            "lists 20000 checkpoints",
        ),
        (
            "size-mismatch",
            listing(tf_entry("ckpt-1", {"ckpt-1.index": {**blob, "size": 5}})),
            "does not match the listing (size or sha256)",
        ),
    ]


@pytest.fixture
def bucket(s3_server, aws_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.create_bucket(Bucket="ckpt-hostile")
    return s3


def test_a_hostile_sync_bucket_is_one_line_and_reaches_nothing(project, home, cli, s3_server, bucket, tmp_path):
    manifest = MANIFEST.format(endpoint=s3_server)
    first = cli("run", "-f", str(project("print('synced nothing')\n", manifest)), timeout=120)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr
    content = b"weights"
    blob = {"size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    bucket.put_object(Bucket="ckpt-hostile", Key=f"team/demo-1/blobs/{blob['sha256']}", Body=content)
    path = project("print('trained anyway')\n", manifest + "resume_from: checkpoint:demo-1\n")
    for case, body, names in cases(blob):
        bucket.put_object(Bucket="ckpt-hostile", Key="team/demo-1/tftrain-checkpoints.json", Body=body)
        with nothing_written_outside(tmp_path, home):
            result = cli("run", "-f", str(path), timeout=60)  # subprocess.TimeoutExpired: a hang
        line = assert_refused(result, StorageError, f"resume_from: {LISTING}", names)
        assert "trained anyway" not in result.stdout + result.stderr, case
        assert SECRET not in result.stdout + result.stderr, case
    assert not (tmp_path / "escaped").exists()
    assert files_containing(tmp_path, [SECRET.encode(), INJECTED.encode()]) == []
    assert "model.s3.json" not in line
