from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from runner.errors import NotFoundError, RegistryError
from runner.registry import Registry
from runner.store import Store


def make_model(root: Path, content: bytes = b"weights") -> Path:
    model = root / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.data").write_bytes(content)
    return model


def test_versions_count_up_and_pull_verifies(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    first = registry.register("digits", make_model(tmp_path / "a"), "digits-1", {"metrics": {}})
    second = registry.register("digits", make_model(tmp_path / "b", b"other"), "digits-2", {})
    other = registry.register("faces", make_model(tmp_path / "c"), None, {})
    assert (first.version, second.version, other.version) == (1, 2, 1)
    assert [m.label for m in registry.versions()] == ["digits@v1", "digits@v2", "faces@v1"]
    assert registry.resolve("digits@latest").version == 2
    assert registry.resolve("digits").version == 2
    pulled = registry.pull("digits@v1", tmp_path / "out")
    assert pulled.version == 1
    assert (tmp_path / "out" / "variables" / "variables.data").read_bytes() == b"weights"
    sums = (first.path / "SHA256SUMS").read_text()
    assert "saved_model.pb" in sums and "variables/variables.data" in sums


def test_single_file_model(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    model_file = tmp_path / "digits.keras"
    model_file.write_bytes(b"keras zip")
    registry.register("digits", model_file, None, {})
    registry.pull("digits@v1", tmp_path / "out")
    assert (tmp_path / "out" / "digits.keras").read_bytes() == b"keras zip"


def test_damaged_version_is_refused(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    model = registry.register("digits", make_model(tmp_path / "a"), None, {})
    (model.files_dir / "saved_model.pb").write_bytes(b"tampered")
    with pytest.raises(RegistryError, match="damaged: saved_model.pb: sha256 mismatch"):
        registry.pull("digits@v1", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unknown_model_and_bad_reference(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    with pytest.raises(NotFoundError, match="model digits@v3 is not registered"):
        registry.resolve("digits@v3")
    with pytest.raises(NotFoundError, match="is not a model reference"):
        registry.resolve("digits@3")


def test_pull_refuses_a_non_empty_directory(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    registry.register("digits", make_model(tmp_path / "a"), None, {})
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(RegistryError, match="not empty"):
        registry.pull("digits", tmp_path / "out")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def _register_many(home: str, source: str, count: int, queue) -> None:
    registry = Registry(Store(Path(home)))
    queue.put([registry.register("digits", Path(source), None, {}).version for _ in range(count)])


def test_parallel_registrations_never_share_a_version(tmp_path):
    source = make_model(tmp_path / "src")
    Store(tmp_path / "home").close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_register_many, args=(str(tmp_path / "home"), str(source), 5, queue)) for _ in range(4)]
    for worker in workers:
        worker.start()
    versions = sorted(v for _ in workers for v in queue.get(timeout=120))
    for worker in workers:
        worker.join()
    assert versions == list(range(1, 21))
    assert [m.version for m in Registry(Store(tmp_path / "home")).versions("digits")] == list(range(1, 21))


def test_layout_is_recorded(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    model_file = tmp_path / "digits.keras"
    model_file.write_bytes(b"keras zip")
    assert registry.register("a", model_file, None, {}).info["layout"] == "file"
    assert registry.register("b", make_model(tmp_path / "m"), None, {}).info["layout"] == "directory"
