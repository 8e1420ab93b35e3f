"""provenance.intoto.json: an in-toto Statement v1 of SLSA v1 provenance in every sealed version,
its subjects exactly SHA256SUMS, its predicate read from what the run recorded; hostile records
yield a thinner statement, never a hang, a crash or a blown-up file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from runner.history import provenance
from runner.history.checksums import read_sums
from runner.history.model_registry import Registry
from runner.history.sealing import Seal
from runner.history.store import Store

COMMIT = "0123456789abcdef0123456789abcdef01234567"
INPUT_SHA = "f" * 64
RUN = {
    "run_id": "digits-7",
    "name": "digits",
    "status": "PostProcessing",
    "created": 1700000000.25,
    "git": {"commit": COMMIT, "branch": "main", "tags": ["v1"], "dirty": True},
    "phases": [{"phase": "Preparing", "started": 1700000001.0}, {"phase": "Running", "started": 1700000002.5}],
    "attempt": {"number": 2, "max_attempts": 3, "previous": "digits-6", "resumed_from": "ckpt-4"},
    "sweep": {"id": "digits-sweep-1", "trial": 4},
    "manifest": {"name": "digits", "framework_version": "2.18"},
}


def lock(manifest_path: Path) -> dict:
    return {
        "tftrain_version": "0.1.0",
        "manifest": {
            "name": "digits",
            "entry_script": "train.py",
            "framework_version": "2.18",
            "compute": {"target": "docker"},
        },
        "manifest_path": str(manifest_path),
        "environment": {
            "python": "/venv/bin/python",
            "description": "image tftrain/x:abc",
            "image": "tftrain/x:abc",
            "image_id": "sha256:" + "1" * 64,
            "base_image": "python:3.11",
            "framework_version": "2.18.1",
        },
        "inputs": {
            "data": {"source": "https://example.com/d.npz", "sha256": INPUT_SHA},
            "local": {"source": "data/", "sha256": None},
        },
        "plan": {"launcher": "single", "target": "docker", "tasks": [{"rank": 0, "env": {"SECRET": "***"}}]},
    }


def seal_run(tmp_path: Path, run: dict | None = RUN, lock_data: dict | None = None, workflow=None):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "tftrain.yml").write_text("name: digits\nentry_script: train.py\n")
    if run is not None:
        (run_dir / "run.json").write_text(json.dumps(run))
    data = lock(tmp_path / "tftrain.yml") if lock_data is None else lock_data
    (run_dir / "manifest.lock.yml").write_text(yaml.safe_dump(data))
    model = tmp_path / "out" / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.data").write_bytes(b"weights")
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    seal = Seal(run_dir / "run.json", run_dir / "manifest.lock.yml", workflow=workflow)
    version = Registry(Store(tmp_path / "home")).register(
        "digits", model, "digits-7", {}, {"model.onnx": tmp_path / "model.onnx"}, seal
    )
    return version, json.loads((version.path / provenance.FILE).read_text())


def test_the_statement_is_slsa_v1_in_toto_v1_with_subjects_equal_to_sha256sums(tmp_path):
    version, document = seal_run(tmp_path)
    assert document["_type"] == "https://in-toto.io/Statement/v1"
    assert document["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {item["name"]: item["digest"]["sha256"] for item in document["subject"]}
    assert subjects == read_sums(version.path / "SHA256SUMS")
    assert len(subjects) == 2
    assert set(document["predicate"]) == {"buildDefinition", "runDetails"}
    assert version.info["provenance"]["file"] == provenance.FILE


def test_the_predicate_says_how_it_was_built(tmp_path):
    import hashlib

    _, document = seal_run(tmp_path)
    build = document["predicate"]["buildDefinition"]
    assert build["buildType"] == provenance.BUILD_TYPE
    manifest = build["externalParameters"]["manifest"]
    assert manifest["sha256"] == hashlib.sha256((tmp_path / "tftrain.yml").read_bytes()).hexdigest()
    assert manifest["resolved"]["entry_script"] == "train.py" and len(manifest["resolved_sha256"]) == 64
    assert build["externalParameters"]["target"] == "docker"
    internal = build["internalParameters"]
    assert internal["run_id"] == "digits-7"
    assert internal["attempt"]["number"] == 2 and internal["sweep"] == {"id": "digits-sweep-1", "trial": 4}
    assert internal["environment"]["image_id"] == "sha256:" + "1" * 64
    assert internal["curated_tensorflow"]["release"] == "2.18" and len(internal["curated_tensorflow"]["sha256"]) == 64
    dependencies = {item.get("name") or item["uri"]: item for item in build["resolvedDependencies"]}
    source = dependencies[f"git:{COMMIT}"]
    assert source["digest"] == {"gitCommit": COMMIT} and source["annotations"]["dirty"] is True
    assert dependencies["input:data"]["digest"] == {"sha256": INPUT_SHA}
    assert "digest" not in dependencies["input:local"]
    assert dependencies["image"] == {"name": "image", "uri": "docker:tftrain/x:abc", "digest": {"sha256": "1" * 64}}
    assert any(name.startswith("curated:tensorflow-2.18") for name in dependencies)
    details = document["predicate"]["runDetails"]
    assert details["builder"]["id"] == provenance.LOCAL_BUILDER
    assert details["metadata"]["invocationId"] == "digits-7"
    assert details["metadata"]["startedOn"] == "2023-11-14T22:13:22.500Z"
    assert details["metadata"]["finishedOn"].endswith("Z")
    assert details["byproducts"] == [{"name": "model.onnx", "digest": {"sha256": hashlib.sha256(b"onnx").hexdigest()}}]


def test_in_a_workflow_the_builder_and_invocation_are_the_workflow_run(tmp_path):
    from runner.settings import GitHubContext

    environ = {
        "GITHUB_WORKFLOW_REF": "o/r/.github/workflows/train.yml@refs/heads/main",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "99",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_TOKEN": "ghs_secret",
    }
    _, document = seal_run(tmp_path, workflow=GitHubContext.from_environment(environ))
    details = document["predicate"]["runDetails"]
    assert details["builder"]["id"] == "https://github.com/o/r/.github/workflows/train.yml@refs/heads/main"
    assert details["metadata"]["invocationId"] == "https://github.com/o/r/actions/runs/99/attempts/2"
    uris = [item.get("uri") for item in document["predicate"]["buildDefinition"]["resolvedDependencies"]]
    assert f"git+https://github.com/o/r@{COMMIT}" in uris
    assert "ghs_secret" not in json.dumps(document)  # only the variables that name the run are read


@pytest.mark.parametrize(
    "hostile",
    [
        lambda run_dir: (run_dir / "run.json").unlink() or os.mkfifo(run_dir / "run.json"),  # must not block
        lambda run_dir: (run_dir / "manifest.lock.yml").unlink() or os.mkfifo(run_dir / "manifest.lock.yml"),
        lambda run_dir: (run_dir / "run.json").write_text("[1, 2"),
        lambda run_dir: (run_dir / "run.json").write_text('"a string"'),
        lambda run_dir: (run_dir / "manifest.lock.yml").write_text("a: [unclosed"),
        # a billion laughs: aliases are refused, never expanded into the JSON
        lambda run_dir: (run_dir / "manifest.lock.yml").write_text(
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b,"
            " *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d,"
            " *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nmanifest:"
            " *g\nenvironment: *g\n"
        ),
        lambda run_dir: (
            (run_dir / "manifest.lock.yml").unlink() or (run_dir / "manifest.lock.yml").symlink_to("/dev/zero")
        ),
        lambda run_dir: (run_dir / "manifest.lock.yml").write_text("manifest_path: /dev/zero\n"),
        # every field of another type than tftrain writes there reads as absent
        lambda run_dir: (run_dir / "run.json").write_text(
            json.dumps({"git": "a" * 40, "phases": [1, "Running"], "manifest": [1], "created": "yesterday"})
        ),
        lambda run_dir: (run_dir / "manifest.lock.yml").write_text(
            "environment: x\nplan: {tasks: 5}\ninputs: [1]\nmanifest: {compute: 3}\ngit: [1]\n"
        ),
        lambda run_dir: (run_dir / "manifest.lock.yml").write_text(
            "manifest: {when: 2024-01-01, 1: one, null: none, 2024-01-02: day}\ninputs: {1: {}, a: {}}\nplan: [1]\n"
        ),
    ],
)
def test_hostile_records_give_a_thinner_statement(tmp_path, hostile):
    facts_dir = tmp_path / "probe"
    facts_dir.mkdir()
    (facts_dir / "run.json").write_text(json.dumps(RUN))
    (facts_dir / "manifest.lock.yml").write_text(yaml.safe_dump(lock(tmp_path / "absent.yml")))
    hostile(facts_dir)
    facts = provenance.gather(facts_dir / "run.json", facts_dir / "manifest.lock.yml", {})
    document = provenance.statement({"a": "0" * 64}, {}, facts, 1700000000.0)
    text = provenance.to_bytes(document)
    assert len(text) < 20_000
    assert document["subject"] == [{"name": "a", "digest": {"sha256": "0" * 64}}]


def test_a_version_without_a_seal_has_no_provenance(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "w").write_bytes(b"w")
    version = Registry(Store(tmp_path / "home")).register("digits", model, None, {})
    assert not (version.path / provenance.FILE).exists() and "provenance" not in version.info
