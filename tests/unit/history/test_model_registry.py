from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import stat
from pathlib import Path

import pytest

from runner.errors import NotFoundError, RegistryError
from runner.history.model_registry import Registry
from runner.history.store import Store
from runner.settings import Settings


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
    workers = [
        ctx.Process(target=_register_many, args=(str(tmp_path / "home"), str(source), 5, queue)) for _ in range(4)
    ]
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


# --- what is registered: regular files and directories; the rest is skipped and listed ---------
def odd_outputs(root: Path) -> Path:
    """A model directory with everything a script can leave under outputs/ besides files."""
    import socket
    import stat

    model = make_model(root)
    (model / "locked.bin").write_bytes(b"no permissions")
    (model / "locked.bin").chmod(0)
    (model / "closed").mkdir()
    (model / "closed" / "inside.txt").write_text("in a chmod 000 directory")
    (model / "closed").chmod(0)
    os.mkfifo(model / "pipe")
    (model / "dangling").symlink_to(root / "nothing-here")
    (model / "loop-a").symlink_to("loop-b")
    (model / "loop-b").symlink_to("loop-a")
    (model / "variables" / "shadow").symlink_to("/etc/shadow")
    os.mknod(model / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(model / "sock"))
    server.close()
    return model


def in_thread(call):
    """Run `call()` where a FIFO opened by mistake would block this test forever: a daemon thread,
    waited for with a generous bound (a hang guard, not a timing assertion). `call` opens its own
    Store: SQLite connections stay in their thread."""
    import threading

    outcome = {}

    def target():
        try:
            outcome["result"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "blocked (a FIFO opened?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def test_odd_entries_under_outputs_are_skipped_and_listed(tmp_path):
    source = odd_outputs(tmp_path / "src")
    model = in_thread(
        lambda: Registry(Store(tmp_path / "home")).register("digits", source, "digits-1", {"metrics": {}})
    )
    assert [str(item) for item in model.skipped] == [
        "dangling (symlink)",
        "loop-a (symlink)",
        "loop-b (symlink)",
        "pipe (FIFO)",
        "sock (socket)",
        "variables/shadow (symlink)",
        "zero (character device)",
    ]
    assert model.skipped_note("outputs/model").startswith(
        "skipped 7 entries under outputs/model: dangling (symlink), loop-a (symlink)"
    )
    record = json.loads((model.path / "version.json").read_text())
    assert record["skipped"][0] == {"path": "dangling", "kind": "symlink"}
    assert {key: record[key] for key in ("name", "version", "run_id")} == {
        "name": "digits",
        "version": 1,
        "run_id": "digits-1",
    }
    assert record["created"] == model.created and record["files"] == 4
    sums = (model.path / "SHA256SUMS").read_text()
    for name in (
        "saved_model.pb",
        "variables/variables.data",
        "locked.bin",
        "closed/inside.txt",
    ):  # root reads chmod 000
        assert f"  {name}\n" in sums
    assert sorted(p.name for p in model.files_dir.iterdir()) == ["closed", "locked.bin", "saved_model.pb", "variables"]
    in_thread(lambda: Registry(Store(tmp_path / "home")).pull("digits@v1", tmp_path / "out"))
    assert (tmp_path / "out" / "closed" / "inside.txt").read_text() == "in a chmod 000 directory"


@pytest.mark.parametrize("make", [os.mkfifo, lambda path: path.symlink_to("/etc/passwd")], ids=["FIFO", "symlink"])
def test_a_model_path_that_is_not_a_file_or_directory_is_refused(tmp_path, make):
    registry = Registry(Store(tmp_path / "home"))
    make(tmp_path / "model.keras")
    with pytest.raises(
        RegistryError,
        match=r"model path .*model.keras is a (FIFO|symlink): only a regular file or a directory is registered",
    ):
        in_thread(lambda: Registry(Store(tmp_path / "home")).register("digits", tmp_path / "model.keras", None, {}))
    assert not (tmp_path / "home" / "models" / "digits").exists() or not os.listdir(
        tmp_path / "home" / "models" / "digits"
    )
    assert registry.store.db.execute("SELECT COUNT(*) FROM models").fetchone() == (0,)


# --- nothing registered is ever overwritten ----------------------------------------------------
def test_a_version_directory_on_disk_is_never_reused(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    first = registry.register("digits", make_model(tmp_path / "a"), None, {})
    kept = (first.path / "SHA256SUMS").read_text()
    stray = registry.root / "digits" / "v5"  # e.g. copied in from a backup the database never saw
    (stray / "model").mkdir(parents=True)
    (stray / "model" / "w").write_text("theirs")
    assert registry.register("digits", make_model(tmp_path / "b", b"other"), None, {}).version == 6
    assert (stray / "model" / "w").read_text() == "theirs"
    assert (first.path / "SHA256SUMS").read_text() == kept
    assert sorted(os.listdir(registry.root / "digits")) == ["v1", "v5", "v6"]  # no staging left over


def test_the_database_removed_does_not_reuse_v1(tmp_path):
    registry = Registry(Store(tmp_path / "home"))
    first = registry.register("digits", make_model(tmp_path / "a"), None, {})
    before = {p.name: p.read_bytes() for p in first.files_dir.rglob("*") if p.is_file()}
    registry.store.close()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / "home" / f"tftrain.db{suffix}").unlink(missing_ok=True)
    again = Registry(Store(tmp_path / "home"))
    assert again.register("digits", make_model(tmp_path / "b", b"other"), None, {}).version == 2
    assert {p.name: p.read_bytes() for p in first.files_dir.rglob("*") if p.is_file()} == before


# --- a damaged version: one line, exit 6, nothing half-pulled ----------------------------------
def _sums(model) -> Path:
    return model.path / "SHA256SUMS"


def _add_to_sums(model, name: str, digest: str) -> None:
    with _sums(model).open("a") as handle:
        handle.write(f"{digest}  {name}\n")


def _link_to_shadow(model) -> None:
    (model.files_dir / "shadow").symlink_to("/etc/shadow")
    _add_to_sums(model, "shadow", hashlib.sha256(Path("/etc/shadow").read_bytes()).hexdigest())


def _replace_model_dir(model) -> None:
    shutil.move(model.files_dir, model.path / "elsewhere")
    model.files_dir.symlink_to(model.path / "elsewhere")


DAMAGE = {
    "SHA256SUMS missing": (lambda m: _sums(m).unlink(), "SHA256SUMS is missing"),
    "SHA256SUMS garbage": (lambda m: _sums(m).write_text("hello world\n"), "SHA256SUMS line 1 is not '<sha256>  NAME'"),
    "SHA256SUMS not UTF-8": (lambda m: _sums(m).write_bytes(b"\xff\xfe\x00garbage\n"), "SHA256SUMS line 1 is not"),
    "SHA256SUMS a FIFO": (lambda m: (_sums(m).unlink(), os.mkfifo(_sums(m))), "SHA256SUMS is a FIFO"),
    "SHA256SUMS empty": (lambda m: _sums(m).write_text(""), "saved_model.pb: not in SHA256SUMS"),
    "version directory missing": (lambda m: shutil.rmtree(m.path), "/models/digits/v1 is missing"),
    "model directory a symlink": (_replace_model_dir, "/models/digits/v1/model is a symlink"),
    "FIFO injected": (lambda m: os.mkfifo(m.files_dir / "pipe"), "pipe is a FIFO"),
    "dangling symlink": (lambda m: (m.files_dir / "gone").symlink_to("/nonexistent"), "gone is a symlink"),
    "symlink to /etc/shadow, sums updated": (_link_to_shadow, "shadow is a symlink"),
    # /dev/null rather than /dev/zero: were it ever read, the test must not fill the disk
    "character device": (
        lambda m: os.mknod(m.files_dir / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3)),
        "dev is a character device",
    ),
    "file not covered": (lambda m: (m.files_dir / "extra.bin").write_bytes(b"x"), "extra.bin: not in SHA256SUMS"),
    "file missing": (lambda m: (m.files_dir / "saved_model.pb").unlink(), "saved_model.pb: missing"),
    "file changed": (
        lambda m: (m.files_dir / "saved_model.pb").write_bytes(b"tampered"),
        "saved_model.pb: sha256 mismatch",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
@pytest.mark.parametrize("reader", ["pull", "resume_from"])
def test_a_damaged_version_is_one_clear_error(tmp_path, case, reader):
    from runner.telemetry.logger import Logger
    from runner.training.resume import resolve_resume

    home = tmp_path / "home"
    damage, message = DAMAGE[case]
    damage(Registry(Store(home)).register("digits", make_model(tmp_path / "a"), None, {}))
    (tmp_path / "work").mkdir()
    target = tmp_path / "work" / "out"
    with pytest.raises(RegistryError) as raised:
        if reader == "pull":
            in_thread(lambda: Registry(Store(home)).pull("digits@v1", target))
        else:
            in_thread(lambda: resolve_resume("model:digits@v1", tmp_path, Store(home), target, Logger(), Settings()))
    text = str(raised.value)
    prefix = "resume_from: " if reader == "resume_from" else ""
    assert text.startswith(f"{prefix}model digits@v1 is damaged: ") and message in text and "\n" not in text, text
    assert raised.value.exit_code == 6
    assert os.listdir(tmp_path / "work") == []


def test_resume_from_a_single_file_model(tmp_path):
    from runner.telemetry.logger import Logger
    from runner.training.resume import resolve_resume

    store = Store(tmp_path / "home")
    (tmp_path / "digits.keras").write_bytes(b"keras zip")
    Registry(store).register("digits", tmp_path / "digits.keras", None, {})
    path = resolve_resume("model:digits", tmp_path, store, tmp_path / "run" / "resume", Logger(), Settings())
    assert path == tmp_path / "run" / "resume" / "digits.keras" and path.read_bytes() == b"keras zip"


def test_odd_but_regular_names_survive_the_checksums(tmp_path):
    """SHA256SUMS escapes backslashes and newlines as GNU sha256sum does, and keeps names that are
    not UTF-8 byte for byte."""
    source = make_model(tmp_path / "src")
    names = [b"back\\slash", b"new\nline", b"\xff\xfe-latin1", "ünïcode".encode()]
    for name in names:
        with open(os.path.join(os.fsencode(source), name), "wb") as handle:
            handle.write(name)
    registry = Registry(Store(tmp_path / "home"))
    registry.register("digits", source, None, {})
    registry.pull("digits@v1", tmp_path / "out")
    for name in names:
        with open(os.path.join(os.fsencode(tmp_path / "out"), name), "rb") as handle:
            assert handle.read() == name
