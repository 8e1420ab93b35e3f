"""`checkpoints:`: where the checkpoint directory may be, and where it may go."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest


def manifest_error(project, manifest: str) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifest(project(manifest=manifest))
    return str(info.value)


def test_defaults_and_where_a_run_syncs(project):
    loaded = load_manifest(project(manifest="checkpoints:\n  sync_to: s3://bucket/team/ckpt/\n"))
    spec = loaded.manifest.checkpoints
    assert (spec.dir, spec.every_seconds, spec.bucket) == ("outputs/checkpoints", 60.0, "bucket")
    assert spec.prefix_for("demo-3") == "team/ckpt/demo-3"
    assert (
        load_manifest(project(manifest="checkpoints:\n  sync_to: s3://bucket\n")).manifest.checkpoints.prefix_for(
            "demo-1"
        )
        == "demo-1"
    )


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        pytest.param(
            "checkpoints:\n  sync_to: s3://bkt/p\n  dir: checkpoints\n",
            ":6: checkpoints.dir: 'checkpoints' must be a directory inside outputs_dir 'outputs'",
            id="outside-outputs",
        ),
        pytest.param(
            "checkpoints:\n  sync_to: s3://bkt/p\n  dir: outputs\n",
            "checkpoints.dir: 'outputs' must be a directory inside outputs_dir",
            id="outputs-itself",
        ),
        pytest.param(
            "checkpoints:\n  sync_to: s3://bkt/p\n  dir: ../x\n",
            "checkpoints.dir: '../x' must be a relative path",
            id="climbs-out",
        ),
        pytest.param(
            "checkpoints:\n  sync_to: /data/ckpt\n",
            ":5: checkpoints.sync_to: '/data/ckpt' must be s3://bucket or s3://bucket/prefix",
            id="not-s3",
        ),
        pytest.param(
            "checkpoints:\n  dir: outputs/c\n", "checkpoints.sync_to: required key is missing", id="no-target"
        ),
        pytest.param(
            "checkpoints:\n  sync_to: s3://bkt/p\n  every_seconds: 0\n", "checkpoints.every_seconds:", id="no-pause"
        ),
        pytest.param(
            "checkpoints:\n  sync_to: s3://bkt/p\ncompute:\n  target: kubernetes\n",
            "checkpoints: checkpoint sync needs the local or docker target, not kubernetes",
            id="remote-target",
        ),
    ],
)
def test_a_bad_checkpoints_key_is_one_line(project, manifest, expected):
    assert expected in manifest_error(project, manifest)
