"""Hostile and damaged models through the CLI: a release asset built like CVE-2025-4517 with a
matching SHA256SUMS, damaged local registries, odd entries under outputs/, a full disk. Each ends
in one line and its exit code, never a traceback, and writes nothing beside the target."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import TFTRAIN
from hostile import assert_refused
from hostile_archives import archive_bytes, cve_2025_4517, directory, entry

from runner.errors import DiskFullError, PublishError, RegistryError
from runner.history.model_registry import Registry
from runner.history.store import Store

pytestmark = pytest.mark.integration


@pytest.fixture
def project(stand_in_project):
    return stand_in_project  # the models here are stand-ins: no gate


def env_for(api=None, **extra):
    github = {"GITHUB_REPOSITORY": "octo/models", "GITHUB_API_URL": api.url, "GITHUB_TOKEN": "ghs_test"} if api else {}
    return {**os.environ, "COLUMNS": "200", **github, **extra}


def tftrain(*args, env):
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, env=env, timeout=300)


def release(api, tag: str, model: bytes, sums: bytes | None = None) -> None:
    sums = sums if sums is not None else f"{hashlib.sha256(model).hexdigest()}  model.tar.gz\n".encode()
    api.add_release("octo", "models", tag, {"model.tar.gz": model, "SHA256SUMS": sums})


@pytest.fixture
def beside(tmp_path):
    """A directory holding `flag`, where the pull's target goes: what an escape would change."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "flag").write_text("original")
    return work


def test_the_cve_2025_4517_release_is_refused(home, github_api, beside):
    target = beside / "out"
    model = cve_2025_4517(target.resolve())
    assert len(model) < 2048  # the 1.4 KB archive of the report
    release(github_api, "evil-v1", model)
    result = tftrain("models", "pull", "evil@v1", "--from", "github", "-o", str(target), env=env_for(github_api))
    assert_refused(result, RegistryError, "model.tar.gz of evil-v1: refusing to extract 'a': a symlink")
    assert "sha256 verified" not in result.stdout
    assert sorted(os.listdir(beside)) == ["flag"] and (beside / "flag").read_text() == "original"


HOSTILE = {
    "x/y->.. chain": (
        archive_bytes(
            [
                directory("x"),
                entry("x/y", type=tarfile.SYMTYPE, link=".."),
                entry("x/y/z", type=tarfile.SYMTYPE, link=".."),
                entry("x/y/z/escaped", b"owned"),
            ]
        ),
        "refusing to extract 'x/y': a symlink",
    ),
    "not a tar": (b"<html>not found</html>\n" * 50, "model.tar.gz of m-v1: not a tar archive"),
    "truncated gzip": (archive_bytes([entry("w", os.urandom(30000))])[:-9000], "model.tar.gz of m-v1: truncated"),
    "a FIFO": (archive_bytes([entry("pipe", type=tarfile.FIFOTYPE)]), "refusing to extract 'pipe': a FIFO"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_release_assets_are_one_error(home, github_api, beside, case):
    model, fragment = HOSTILE[case]
    release(github_api, "m-v1", model)
    result = tftrain("models", "pull", "m@v1", "--from", "github", "-o", str(beside / "out"), env=env_for(github_api))
    assert_refused(result, RegistryError, fragment)
    assert sorted(os.listdir(beside)) == ["flag"]


def test_a_bomb_stops_at_the_configured_cap(home, github_api, beside):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("weights")
        info.size = 64 << 20
        archive.addfile(info, io.BytesIO(bytes(info.size)))
    model = gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)
    assert len(model) < 256 << 10
    release(github_api, "m-v1", model)
    env = env_for(github_api, TFTRAIN_MAX_ARCHIVE_BYTES=str(8 << 20))
    result = tftrain("models", "pull", "m@v1", "--from", "github", "-o", str(beside / "out"), env=env)
    assert_refused(
        result,
        RegistryError,
        "refusing to extract 'weights': more than 8388608 bytes in all (TFTRAIN_MAX_ARCHIVE_BYTES)",
    )
    assert sorted(os.listdir(beside)) == ["flag"]


def test_a_garbage_sha256sums_on_a_release(home, github_api, beside):
    release(github_api, "m-v1", archive_bytes([entry("w", b"x")]), sums=b"\xff\xfenot sums at all\n")
    result = tftrain("models", "pull", "m@v1", "--from", "github", "-o", str(beside / "out"), env=env_for(github_api))
    assert_refused(result, PublishError, "release m-v1: SHA256SUMS line 1 is not '<sha256>  NAME'")


# --- the local registry ------------------------------------------------------------------------
def registered(home: Path, tmp_path: Path):
    source = tmp_path / "model"
    (source / "variables").mkdir(parents=True)
    (source / "saved_model.pb").write_bytes(b"graph")
    (source / "variables" / "data").write_bytes(os.urandom(3000))
    with Store(home) as store:
        return Registry(store).register("digits", source, None, {})


def _shadow(model) -> None:
    (model.files_dir / "shadow").symlink_to("/etc/shadow")
    with (model.path / "SHA256SUMS").open("a") as sums:
        sums.write(f"{hashlib.sha256(Path('/etc/shadow').read_bytes()).hexdigest()}  shadow\n")


DAMAGE = {
    "symlink to /etc/shadow, sums updated": (_shadow, "shadow is a symlink"),
    "a FIFO": (lambda model: os.mkfifo(model.files_dir / "variables" / "pipe"), "variables/pipe is a FIFO"),
    "garbage SHA256SUMS": (
        lambda model: (model.path / "SHA256SUMS").write_bytes(b"\x00\xff garbage"),
        "SHA256SUMS line 1 is not",
    ),
    "version directory gone": (lambda model: shutil.rmtree(model.path), "models/digits/v1 is missing"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_pulling_a_damaged_local_version(home, tmp_path, beside, case):
    damage, fragment = DAMAGE[case]
    damage(registered(home, tmp_path))
    result = tftrain("models", "pull", "digits@v1", "-o", str(beside / "out"), env=env_for())
    assert_refused(result, RegistryError, "model digits@v1 is damaged: ", fragment)
    assert sorted(os.listdir(beside)) == ["flag"]


def test_resuming_from_a_damaged_local_version(home, tmp_path, project):
    _shadow(registered(home, tmp_path))
    path = project(manifest="resume_from: model:digits@v1\n")
    result = tftrain("run", "-f", str(path), env=env_for())
    assert_refused(result, RegistryError, "resume_from: model digits@v1 is damaged: shadow is a symlink")


ODD_OUTPUTS = """\
import os
os.makedirs("outputs/model/variables", exist_ok=True)
open("outputs/model/saved_model.pb", "wb").write(b"graph")
open("outputs/model/variables/data", "wb").write(b"weights")
open("outputs/model/locked", "wb").write(b"mode 000")
os.chmod("outputs/model/locked", 0)
os.mkfifo("outputs/model/pipe")
os.symlink("/etc/shadow", "outputs/model/variables/shadow")
os.symlink("nowhere", "outputs/model/dangling")
os.symlink("loop", "outputs/model/loop")
os.makedirs("outputs/model/closed")
os.chmod("outputs/model/closed", 0)
"""


def test_odd_outputs_are_skipped_and_the_run_completes(home, tmp_path, project):
    result = tftrain("run", "-f", str(project(script=ODD_OUTPUTS)), env=env_for())
    assert result.returncode == 0, result.stderr
    assert (
        "skipped 4 entries under outputs/model: dangling (symlink), loop (symlink), pipe (FIFO), variables/shadow"
        " (symlink)" in result.stdout + result.stderr
    )
    assert (home / "runs" / "demo-1" / "run.json").exists() and (home / "runs" / "demo-1" / "summary.md").exists()
    pulled = tftrain("models", "pull", "demo@v1", "-o", str(tmp_path / "pulled"), env=env_for())
    assert pulled.returncode == 0, pulled.stderr
    assert sorted(os.listdir(tmp_path / "pulled")) == ["closed", "locked", "saved_model.pb", "variables"]
    assert os.listdir(tmp_path / "pulled" / "variables") == ["data"]


# --- a full disk ---------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs: writing more is ENOSPC, for real."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True, timeout=30)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)


def test_a_full_disk_while_registering_leaves_nothing_registered(tmp_path, small_disk):
    source = tmp_path / "model"
    source.mkdir()
    (source / "saved_model.pb").write_bytes(b"graph")
    (source / "weights").write_bytes(os.urandom(2 << 20))
    store = Store(small_disk / "home")
    with pytest.raises(DiskFullError, match=r"^disk full writing .*/models/digits/.*weights$"):
        Registry(store).register("digits", source, None, {})
    assert os.listdir(small_disk / "home" / "models" / "digits") == []
    assert store.db.execute("SELECT COUNT(*) FROM models").fetchone() == (0,)
    store.close()


def test_a_full_disk_while_pulling_is_exit_22(home, tmp_path, github_api, small_disk):
    registered(home, tmp_path)
    (tmp_path / "model" / "variables" / "data").write_bytes(os.urandom(2 << 20))
    with Store(home) as store:
        Registry(store).register("big", tmp_path / "model", None, {})
    result = tftrain("models", "pull", "big@v1", "-o", str(small_disk / "out"), env=env_for())
    assert_refused(result, DiskFullError, "disk full writing ")
    assert os.listdir(small_disk) == []

    release(github_api, "big-v1", archive_bytes([entry("weights", os.urandom(2 << 20))]))
    result = tftrain(
        "models", "pull", "big@v1", "--from", "github", "-o", str(small_disk / "out"), env=env_for(github_api)
    )
    assert_refused(result, DiskFullError, f"disk full writing {small_disk / 'out' / 'weights'}")
    assert os.listdir(small_disk) == []


# --- the container copy-out (pool hosts): same reader, lenient ---------------------------------
def test_the_container_copy_out_skips_links_fifos_and_devices(docker_client, tmp_path):
    import time

    from conftest import BASE_IMAGE

    from runner.plan.model import ContainerSpec
    from runner.targets.container import Container

    script = (
        "mkdir -p /out/sub && printf w > /out/model.bin && printf m > /out/sub/m.jsonl && ln -s /etc/shadow /out/shadow"
        " && mkfifo /out/pipe && mknod /out/zero c 1 5"
    )
    spec = ContainerSpec(image=BASE_IMAGE, mounts=(), user="", network_mode="none")
    read, write = os.pipe()
    destination = tmp_path / "outputs"
    (tmp_path / "victim").write_text("original")
    destination.mkdir()
    (destination / "model.bin").symlink_to(tmp_path / "victim")  # replaced, never written through
    try:
        with Container(
            docker_client, spec, ["sh", "-c", script], {}, "/", f"tftrain-test-copy-out-{os.getpid()}", {}
        ) as container:
            container.start(write)
            deadline = time.monotonic() + 120
            while container.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert container.poll() == 0
            fetched = container.fetch("/out", destination)
    finally:
        os.close(read)
    assert sorted(str(item) for item in fetched.skipped) == [
        "out/pipe (FIFO)",
        "out/shadow (symlink)",
        "out/zero (character device)",
    ]
    assert fetched.files == 2
    assert not (destination / "model.bin").is_symlink() and (destination / "model.bin").read_text() == "w"
    assert (destination / "sub" / "m.jsonl").read_text() == "m"
    assert (tmp_path / "victim").read_text() == "original"
    assert sorted(os.listdir(destination)) == ["model.bin", "sub"]
