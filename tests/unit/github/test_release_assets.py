"""The registered version's model.sig and provenance as release assets (_seal_assets): the
version's directory sits in the registry, where others may write, so what it holds is checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner.errors import PublishError, SignatureError
from runner.github.release_assets import _seal_assets
from runner.history.checksums import format_sums, sha256_file
from runner.history.rundir import RunPaths


def _layout(tmp_path: Path) -> tuple[Path, RunPaths, Path, Path]:
    """A run's model file, its RunPaths, the registered version v1 of `demo` (signed), the assets dir."""
    paths = RunPaths(tmp_path / "runs" / "demo-1")
    paths.root.mkdir(parents=True)
    model = paths.root / "model.keras"
    model.write_bytes(b"weights")
    version = tmp_path / "models" / "demo" / "v1"
    version.mkdir(parents=True)
    (version / "version.json").write_text(json.dumps({"signature": {"file": "model.sig", "method": "key"}}))
    (version / "SHA256SUMS").write_text(format_sums({"model.keras": sha256_file(model)}))
    (version / "model.sig").write_text("{}")
    assets = tmp_path / "assets"
    assets.mkdir()
    return model, paths, version, assets


def test_the_signature_is_copied_when_the_files_are_those_registered(tmp_path):
    model, paths, version, assets = _layout(tmp_path)
    sealed = _seal_assets(model, paths, {"model": "demo@v1"}, assets)
    assert sealed["signature"]["method"] == "key" and (assets / "model.sig").read_text() == "{}"


@pytest.mark.parametrize("attack", ["missing", "fifo"])
def test_a_bad_version_sums_is_one_publish_error(tmp_path, attack):
    model, paths, version, assets = _layout(tmp_path)
    (version / "SHA256SUMS").unlink()
    if attack == "fifo":
        os.mkfifo(version / "SHA256SUMS")  # would block a plain read
    with pytest.raises(PublishError, match="demo@v1: SHA256SUMS"):
        _seal_assets(model, paths, {"model": "demo@v1"}, assets)


def test_a_linked_signature_is_never_followed(tmp_path):
    model, paths, version, assets = _layout(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("not for the release")
    (version / "model.sig").unlink()
    (version / "model.sig").symlink_to(secret)
    with pytest.raises(SignatureError, match="demo@v1: model.sig is"):
        _seal_assets(model, paths, {"model": "demo@v1"}, assets)
    assert not (assets / "model.sig").exists()


@pytest.mark.parametrize("record", ["fifo", "[1]", "{", "missing"])
def test_an_odd_version_json_is_one_publish_error_not_a_release_without_its_seal(tmp_path, record):
    """It published the release without model.sig, silently: read as an unsigned model."""
    model, paths, version, assets = _layout(tmp_path)
    (version / "version.json").unlink()
    if record == "fifo":
        os.mkfifo(version / "version.json")  # a plain read would wait forever
    elif record != "missing":  # model.sig is there: the version was signed
        (version / "version.json").write_text(record)
    with pytest.raises(
        PublishError,
        match=r"^demo@v1: version\.json.*: the release would leave out what it says \(signature, provenance\)$",
    ):
        _seal_assets(model, paths, {"model": "demo@v1"}, assets)
    assert not (assets / "model.sig").exists()


def test_a_version_with_no_record_here_publishes_without_a_seal(tmp_path):
    model, paths, version, assets = _layout(tmp_path)
    for name in ("version.json", "model.sig"):
        (version / name).unlink()
    assert _seal_assets(model, paths, {"model": "demo@v1"}, assets) == {}


def _version_signed(version: Path) -> None:
    """A model.sig that says it covers the version's directory (its recorded ignore list names version.json)."""
    import base64

    payload = {"predicate": {"serialization": {"ignore_paths": ["version.json", "model.sig"]}, "resources": []}}
    (version / "model.sig").write_text(
        json.dumps({"dsseEnvelope": {"payload": base64.b64encode(json.dumps(payload).encode()).decode()}})
    )


@pytest.mark.parametrize("change", ["changed", "added", "removed"])
def test_serving_files_changed_since_registration_are_not_published_with_the_signature(tmp_path, change):
    """model.sig signs serving/ and model.onnx too: published from a run whose files changed, it would not verify."""
    model, paths, version, assets = _layout(tmp_path)
    _version_signed(version)
    (version / "serving").mkdir()
    (version / "serving" / "serving.json").write_text('{"tensorflow": "2.18.1"}')
    (assets / "serving.json").write_text('{"tensorflow": "2.18.1"}')  # as build_assets copies the run's
    assert _seal_assets(model, paths, {"model": "demo@v1"}, assets)["signature"]["method"] == "key"
    (assets / "model.sig").unlink()
    if change == "changed":
        (assets / "serving.json").write_text('{"tensorflow": "2.99"}')
    elif change == "added":
        (assets / "model.onnx").write_bytes(b"onnx")
    else:
        (assets / "serving.json").unlink()
    with pytest.raises(
        PublishError,
        match="the run's serving files changed since it was registered as demo@v1: its model.sig would not verify",
    ):
        _seal_assets(model, paths, {"model": "demo@v1"}, assets)
    assert not (assets / "model.sig").exists()
