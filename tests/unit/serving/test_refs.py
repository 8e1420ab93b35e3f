"""REF → a version directory of its own (runner.serving.refs) and the checks `tftrain serve`
makes before it builds anything (runner.cli.serve)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from runner.cli.serve import check_port_free
from runner.errors import NotFoundError, PlanError, RegistryError, ServingError
from runner.history.checksums import sha256_file
from runner.history.model_registry import Registry
from runner.history.store import Store
from runner.serving.launch import check_servable, endpoints
from runner.serving.layout import Runtime, VersionDir
from runner.serving.refs import checked_out
from runner.settings import ArchiveLimits


def saved_model(root: Path) -> Path:
    (root / "variables").mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"graph")
    return root


def add_serving(store: Store, model, files: dict[str, bytes]) -> None:
    """What the gate adds to a version: files beside model/ and their sha256 in version.json."""
    for relative, content in files.items():
        (model.path / relative).parent.mkdir(parents=True, exist_ok=True)
        (model.path / relative).write_bytes(content)
    info = {
        **model.info,
        "serving": {"tensorflow": "2.17.1"},
        "extras": {name: sha256_file(model.path / name) for name in files},
    }
    store.db.execute(
        "UPDATE models SET info = ? WHERE name = ? AND version = ?", (json.dumps(info), model.name, model.version)
    )


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TFTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_version_is_copied_out_with_its_serving_files_and_removed_after(home, tmp_path):
    with Store(home) as store:
        model = Registry(store).register("digits", saved_model(tmp_path / "sm"), None, {"framework_version": "2.18"})
        add_serving(store, model, {"serving/serving.json": b'{"path": "."}', "model.onnx": b"onnx"})
    with checked_out("digits@latest", logger=None, home=home) as served:
        root = served.directory.root
        assert (served.name, served.label, served.version, served.framework_version) == (
            "digits",
            "digits@v1",
            1,
            "2.17.1",
        )
        assert (root / "model" / "saved_model.pb").read_bytes() == b"graph"
        assert served.directory.onnx.read_bytes() == b"onnx"
        assert served.directory.located().path == root / "model"
    assert not root.exists()


def test_a_serving_file_that_does_not_match_version_json_is_damage(home, tmp_path):
    with Store(home) as store:
        model = Registry(store).register("digits", saved_model(tmp_path / "sm"), None, {})
        add_serving(store, model, {"model.onnx": b"onnx"})
    (model.path / "model.onnx").write_bytes(b"tampered")
    with pytest.raises(RegistryError, match=r"model.onnx is not what version.json says \(sha256 differs\)"):
        with checked_out("digits@v1", logger=None, home=home):
            pass


def test_a_run_id_serves_the_model_that_run_registered(home, tmp_path):
    with Store(home) as store:
        run_id = store.new_run("digits", json.dumps({"name": "digits"}))
        model = Registry(store).register("digits", saved_model(tmp_path / "sm"), run_id, {})
        store.update_run(run_id, model=model.label)
        bare = store.new_run("other", json.dumps({"name": "other"}))
    with checked_out(run_id, logger=None, home=home) as served:
        assert served.label == "digits@v1" and served.framework_version is None
    with pytest.raises(NotFoundError, match="neither a run nor a registered model"):
        with checked_out(bare, logger=None, home=home):
            pass
    with pytest.raises(NotFoundError, match="not registered"):
        with checked_out("digits@v7", logger=None, home=home):
            pass


def test_what_cannot_be_served_is_refused_before_anything_is_built(tmp_path):
    from runner.serving.refs import Served

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.pkl").write_bytes(b"pickle")
    served = Served("digits", "digits@v1", 1, None, VersionDir(tmp_path))
    with pytest.raises(ServingError, match="digits@v1 has no loadable model"):
        check_servable(served, Runtime.TENSORFLOW)
    with pytest.raises(ServingError, match="digits@v1 has no model.onnx"):
        check_servable(served, Runtime.ONNX)
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    check_servable(served, Runtime.ONNX)


def test_a_port_in_use_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PlanError, match=f"port {port} on 127.0.0.1 is in use"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)


def test_endpoints_name_the_model_and_a_reachable_address():
    lines = endpoints("0.0.0.0", 8080, "digits")
    assert lines[0].startswith("POST http://127.0.0.1:8080/v1/models/digits:predict")
    assert any("/v2/health/ready" in line for line in lines)


class Asset:
    def __init__(self, name: str, content: bytes) -> None:
        self.name, self.content = name, content

    def download_asset(self, path: str) -> None:
        Path(path).write_bytes(self.content)


class Release:
    tag_name = "digits-v2"

    def __init__(self, assets: dict[str, bytes]) -> None:
        import hashlib

        sums = "".join(f"{hashlib.sha256(content).hexdigest()}  {name}\n" for name, content in sorted(assets.items()))
        self.assets = [Asset(name, content) for name, content in assets.items()] + [Asset("SHA256SUMS", sums.encode())]

    def get_assets(self):
        return self.assets


def test_a_releases_serving_assets_land_where_the_registry_keeps_them(tmp_path):
    from runner.serving.refs import fetch_serving_assets

    fetch_serving_assets(
        Release({"serving.json": b"{}", "serving-sample.npz": b"npz", "model.onnx": b"onnx", "metrics.json": b"{}"}),
        tmp_path,
        ArchiveLimits(),
    )
    directory = VersionDir(tmp_path)
    assert (directory.serving_json.read_bytes(), directory.sample.read_bytes(), directory.onnx.read_bytes()) == (
        b"{}",
        b"npz",
        b"onnx",
    )
    assert not directory.predictions.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "model.onnx",
        "serving",
    ]


def test_a_release_asset_that_does_not_match_sha256sums_is_refused(tmp_path):
    from runner.errors import PublishError
    from runner.serving.refs import fetch_serving_assets

    release = Release({"model.onnx": b"onnx"})
    release.assets[0].content = b"swapped"
    with pytest.raises(PublishError, match="model.onnx of digits-v2 does not match its SHA256SUMS"):
        fetch_serving_assets(release, tmp_path, ArchiveLimits())


def test_a_releases_evidence_lands_in_evaluation_as_the_version_keeps_it(tmp_path):
    from runner.serving.refs import fetch_serving_assets

    assets = {
        "evaluation.json": b'{"metric": "correct"}',
        "evaluation-seed-0.jsonl": b'{"id": "a", "correct": 1}\n',
        "evaluation-seed-1.jsonl": b'{"id": "a", "correct": 0}\n',
        "evaluation-seed-x.jsonl": b"not a seed",
        "metrics.json": b"{}",
    }
    fetch_serving_assets(Release(assets), tmp_path, ArchiveLimits())
    kept = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert kept == ["evaluation/evaluation.json", "evaluation/seed-0.jsonl", "evaluation/seed-1.jsonl"]
    assert (tmp_path / "evaluation" / "seed-1.jsonl").read_bytes() == assets["evaluation-seed-1.jsonl"]


@pytest.mark.parametrize(
    "damage, words",
    [
        ("swapped", "evaluation-seed-0.jsonl of digits-v2 does not match its SHA256SUMS"),
        ("unlisted", "evaluation-seed-0.jsonl of digits-v2 is not in its SHA256SUMS"),
        ("huge", "evaluation-seed-0.jsonl of digits-v2 is 2048 MB, over the 1024 MB limit"),
        ("no sums", "release digits-v2 has no SHA256SUMS"),
    ],
)
def test_a_releases_damaged_evidence_is_refused_and_not_kept(tmp_path, damage, words):
    from runner.errors import PublishError
    from runner.serving.refs import fetch_serving_assets

    release = Release({"evaluation.json": b"{}", "evaluation-seed-0.jsonl": b'{"id": "a", "correct": 1}\n'})
    seed = next(asset for asset in release.assets if asset.name == "evaluation-seed-0.jsonl")
    if damage == "swapped":
        seed.content = b'{"id": "a", "correct": 0}\n'
    elif damage == "unlisted":
        release.assets.append(Asset("evaluation-seed-0.jsonl", b"x"))
        release.assets.remove(seed)
        sums = next(asset for asset in release.assets if asset.name == "SHA256SUMS")
        sums.content = b"".join(line + b"\n" for line in sums.content.splitlines() if b"seed-0" not in line)
    elif damage == "huge":
        seed.size = 2 << 30
        seed.download_asset = lambda path: pytest.fail("a 2 GB asset was downloaded")
    else:
        release.assets = [asset for asset in release.assets if asset.name != "SHA256SUMS"]
    with pytest.raises(PublishError, match=f"^{words}$"):
        fetch_serving_assets(release, tmp_path, ArchiveLimits())
    assert not (tmp_path / "evaluation" / "seed-0.jsonl").exists()


def test_a_release_with_more_seed_assets_than_a_set_holds_is_refused_before_any_download(tmp_path):
    from runner.errors import PublishError
    from runner.serving.refs import fetch_serving_assets

    release = Release({f"evaluation-seed-{n}.jsonl": b"x" for n in range(102)})
    for asset in release.assets:
        asset.download_asset = lambda path: pytest.fail("downloaded")
    with pytest.raises(PublishError, match="102 evaluation-seed-N.jsonl assets, over the 100 seeds"):
        fetch_serving_assets(release, tmp_path, ArchiveLimits())


def test_a_releases_replay_report_and_requests_land_in_serving_as_the_version_keeps_them(tmp_path):
    from runner.serving.refs import fetch_serving_assets

    fetch_serving_assets(
        Release({"replay.json": b"{}", "replay-requests.jsonl": b'{"body": 1}\n'}), tmp_path, ArchiveLimits()
    )
    assert sorted(p.name for p in (tmp_path / "serving").iterdir()) == ["replay-requests.jsonl", "replay.json"]
