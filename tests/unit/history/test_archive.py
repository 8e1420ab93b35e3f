"""Model archives are extracted by our own rules: hostile archives (CVE-2025-4517's symlink chain,
links, devices, bombs, damaged streams) are refused with one RegistryError and leave nothing,
neither in the target nor beside it."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest
from hostile_archives import archive_bytes, cve_2025_4517, device, directory, entry, plain_tar, with_pax

from runner.errors import RegistryError, UsageError
from runner.history.archive import extract_into, unpack
from runner.history.packing import pack
from runner.settings import ArchiveLimits, resolve


def snapshot(root: Path) -> dict:
    """Every path below root: its type, and a file's content."""
    shot = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            shot[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            shot[str(path)] = ("file", path.read_bytes())
        else:
            shot[str(path)] = ("other", path.lstat().st_mode >> 12)
    return shot


@pytest.fixture
def place(tmp_path):
    """(work directory with a `flag` file beside the target, target, archive path)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "flag").write_text("original")
    (tmp_path / "in").mkdir()
    return work, work / "out", tmp_path / "in" / "model.tar.gz"


def no_end_marker() -> bytes:
    raw = plain_tar(b"x" * 512)  # header and one data block, then the end-of-archive blocks
    return gzip.compress(raw[:1024], mtime=0)


HOSTILE = {
    "x/y->.. chain": (
        lambda dest: archive_bytes(
            [
                directory("x"),
                entry("x/y", type=tarfile.SYMTYPE, link=".."),
                entry("x/y/z", type=tarfile.SYMTYPE, link=".."),
                entry("x/y/z/escaped", b"owned"),
            ]
        ),
        "refusing to extract 'x/y': a symlink (to '..')",
    ),
    "absolute name": (lambda dest: archive_bytes([entry(str(dest.parent / "abs.txt"), b"owned")]), "an absolute path"),
    "dotdot": (
        lambda dest: archive_bytes([entry("../escaped.txt", b"owned")]),
        "refusing to extract '../escaped.txt': it leaves the target directory",
    ),
    "dotdot inside": (
        lambda dest: archive_bytes([directory("a"), entry("a/../../escaped.txt", b"owned")]),
        "it leaves the target directory",
    ),
    "empty component": (lambda dest: archive_bytes([entry("a//b", b"x")]), "an empty name component"),
    "NUL in a pax name": (lambda dest: archive_bytes([with_pax("ab", {"path": "a\x00b"})]), "a NUL in the name"),
    "hardlink": (
        lambda dest: archive_bytes([entry("h", type=tarfile.LNKTYPE, link="../flag")]),
        "a hardlink (to '../flag')",
    ),
    "character device": (
        lambda dest: archive_bytes([device("zero", 1, 5)]),
        "refusing to extract 'zero': a character device",
    ),
    "block device": (lambda dest: archive_bytes([entry("sda", type=tarfile.BLKTYPE)]), "a block device"),
    "FIFO": (lambda dest: archive_bytes([entry("pipe", type=tarfile.FIFOTYPE)]), "refusing to extract 'pipe': a FIFO"),
    "GNU sparse file": (
        lambda dest: archive_bytes([entry("s", type=tarfile.GNUTYPE_SPARSE)], fmt=tarfile.GNU_FORMAT),
        "a sparse file",
    ),
    "duplicate name": (
        lambda dest: archive_bytes([entry("w", b"one"), entry("w", b"two")]),
        "refusing to extract 'w': a duplicate name",
    ),
    "file where a directory is expected": (
        lambda dest: archive_bytes([entry("a", b"file"), entry("a/b", b"x")]),
        "refusing to extract 'a/b': a name taken",
    ),
    "directory where a file is": (
        lambda dest: archive_bytes([entry("a", b"file"), directory("a")]),
        "refusing to extract 'a': a name taken",
    ),
    "not a tar": (lambda dest: b"just some text, not an archive\n" * 40, "not a tar archive"),
    "empty file": (lambda dest: b"", "not a tar archive"),
    "gzip of not a tar": (lambda dest: gzip.compress(b"\x01" * 4096), "not a tar archive"),
    "truncated gzip": (lambda dest: archive_bytes([entry("w", os.urandom(20000))])[:-5000], "truncated"),
    "corrupt gzip": (
        lambda dest: (lambda b: b[:30] + bytes(x ^ 0xFF for x in b[30:60]) + b[60:])(
            archive_bytes([entry("w", b"a" * 50000)])
        ),
        "gzip",
    ),
    "gzip checksum": (
        lambda dest: (lambda b: b[:-8] + bytes(4) + b[-4:])(archive_bytes([entry("w", b"a" * 5000)])),
        "gzip",
    ),
    "no end-of-archive block": (lambda dest: no_end_marker(), "truncated or damaged"),
    "truncated plain tar": (lambda dest: plain_tar(os.urandom(5000))[:3000], "truncated"),
    "a 2 MiB pax header": (
        lambda dest: archive_bytes([with_pax("w", {"comment": "x" * (2 << 20)})]),
        "an extended header of",
    ),
    "trailing data": (
        lambda dest: gzip.compress(plain_tar(b"x") + os.urandom(2 << 20), mtime=0),
        "after the end of the archive",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_leave_nothing(place, case):
    work, target, archive = place
    build, message = HOSTILE[case]
    archive.write_bytes(build(target))
    before = snapshot(work.parent)
    with pytest.raises(RegistryError) as raised:
        unpack(archive, target, label="model.tar.gz of m-v1")
    text = str(raised.value)
    assert text.startswith("model.tar.gz of m-v1: ") and message in text and "\n" not in text, text
    assert snapshot(work.parent) == before
    assert not target.exists()


def test_the_cve_2025_4517_chain_writes_nothing_beside_the_target(place):
    work, target, archive = place
    archive.write_bytes(cve_2025_4517(target))
    assert len(archive.read_bytes()) < 4096
    with pytest.raises(
        RegistryError,
        match=r"model.tar.gz: refusing to extract 'd+': a symlink|model.tar.gz: refusing to extract 'a': a symlink",
    ):
        unpack(archive, target)
    assert (work / "flag").read_text() == "original"
    assert sorted(os.listdir(work)) == ["flag"]


def test_a_gzip_bomb_stops_at_the_byte_cap(place):
    work, target, archive = place
    with archive.open("wb") as handle, gzip.GzipFile(fileobj=handle, mode="wb", mtime=0) as zipped:
        zipped.write(plain_tar(bytes(8 << 20)))  # 8 MiB of zeros: a few KiB compressed
    assert archive.stat().st_size < 64 << 10
    with pytest.raises(
        RegistryError,
        match=r"refusing to extract 'saved_model.pb': more than 1048576 bytes in all \(TFTRAIN_MAX_ARCHIVE_BYTES\)",
    ):
        unpack(archive, target, limits=ArchiveLimits(max_bytes=1 << 20))
    assert sorted(os.listdir(work)) == ["flag"]


def test_too_many_entries(place):
    work, target, archive = place
    archive.write_bytes(archive_bytes([entry(f"f{i}", b"x") for i in range(20)]))
    with pytest.raises(
        RegistryError, match=r"refusing to extract 'f10': more than 10 entries \(TFTRAIN_MAX_ARCHIVE_ENTRIES\)"
    ):
        unpack(archive, target, limits=ArchiveLimits(max_entries=10))
    assert sorted(os.listdir(work)) == ["flag"]
    assert unpack(archive, target, limits=ArchiveLimits(max_entries=20)).files == 20


def test_the_caps_come_from_the_environment(place):
    work, target, archive = place
    archive.write_bytes(archive_bytes([entry("w", b"x" * 100)]))
    with pytest.raises(RegistryError, match="more than 99 bytes"):
        unpack(archive, target, limits=resolve({"TFTRAIN_MAX_ARCHIVE_BYTES": "99"}).archive_limits)
    with pytest.raises(UsageError, match="TFTRAIN_MAX_ARCHIVE_BYTES must be a positive whole number, not 'lots'"):
        resolve({"TFTRAIN_MAX_ARCHIVE_BYTES": "lots"})
    assert resolve({}).archive_limits == ArchiveLimits(max_bytes=256 << 30, max_entries=1_000_000)


def make_model(root: Path) -> Path:
    (root / "variables").mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"graph" * 100)
    (root / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(70000))
    (root / "assets").mkdir()
    return root


def test_pack_and_unpack_round_trip(tmp_path):
    source = make_model(tmp_path / "model")
    (source / "link").symlink_to("/etc/passwd")
    os.mkfifo(source / "pipe")
    digest = pack(source, tmp_path / "model.tar.gz")
    assert len(digest) == 64
    with tarfile.open(tmp_path / "model.tar.gz") as archive:  # links and FIFOs are never packed
        assert archive.getnames() == [
            "assets",
            "saved_model.pb",
            "variables",
            "variables/variables.data-00000-of-00001",
        ]
    (tmp_path / "empty").mkdir()  # an existing empty directory is a fine target
    extracted = unpack(tmp_path / "model.tar.gz", tmp_path / "empty")
    assert (extracted.files, extracted.bytes) == (2, 70500)
    for name in ("saved_model.pb", "variables/variables.data-00000-of-00001"):
        assert (tmp_path / "empty" / name).read_bytes() == (source / name).read_bytes()
    assert (tmp_path / "empty" / "assets").is_dir()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_names_with_dot_components_as_tar_writes_them(tmp_path):
    archive = tmp_path / "cli.tar.gz"
    archive.write_bytes(
        archive_bytes(
            [directory("."), directory("./variables"), entry("./variables/data", b"w"), entry("./saved_model.pb", b"g")]
        )
    )
    unpack(archive, tmp_path / "out")
    assert (tmp_path / "out" / "variables" / "data").read_bytes() == b"w"
    assert (tmp_path / "out" / "saved_model.pb").read_bytes() == b"g"


def test_a_non_empty_target_is_left_alone(tmp_path):
    archive = tmp_path / "m.tar.gz"
    archive.write_bytes(archive_bytes([entry("w", b"new")]))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(RegistryError, match="exists and is not empty"):
        unpack(archive, tmp_path / "out")
    assert os.listdir(tmp_path / "out") == ["keep.txt"]
    assert sorted(os.listdir(tmp_path)) == ["m.tar.gz", "out"]


def test_parents_made_for_the_target_go_when_it_fails(tmp_path):
    archive = tmp_path / "m.tar.gz"
    archive.write_bytes(archive_bytes([entry("../x", b"owned")]))
    with pytest.raises(RegistryError):
        unpack(archive, tmp_path / "deep" / "er" / "out")
    assert sorted(os.listdir(tmp_path)) == ["m.tar.gz"]


def test_lenient_extraction_skips_and_lists(tmp_path):
    """The container copy-out: odd entries are skipped and listed, the rest arrives, existing
    files are replaced (never written through a link), the first component is dropped."""
    destination = tmp_path / "outputs"
    destination.mkdir()
    (tmp_path / "victim").write_text("original")
    (destination / "old.txt").symlink_to(tmp_path / "victim")
    data = archive_bytes(
        [
            directory("outputs"),
            entry("outputs/model.bin", b"weights"),
            entry("outputs/link", type=tarfile.SYMTYPE, link="/etc/passwd"),
            entry("outputs/pipe", type=tarfile.FIFOTYPE),
            entry("outputs/../escaped", b"owned"),
            entry("outputs/old.txt", b"replaced?"),
            directory("outputs/sub"),
            entry("outputs/sub/metrics.jsonl", b"{}"),
        ],
        compress=False,
    )
    extracted = extract_into(io.BytesIO(data), destination, "/tftrain/outputs of c", strip=1)
    assert [str(item) for item in extracted.skipped] == [
        "outputs/link (symlink)",
        "outputs/pipe (FIFO)",
        "outputs/../escaped (unsafe name)",
    ]
    assert (destination / "model.bin").read_bytes() == b"weights"
    assert not (destination / "old.txt").is_symlink() and (destination / "old.txt").read_bytes() == b"replaced?"
    assert (destination / "sub" / "metrics.jsonl").read_bytes() == b"{}"
    assert (tmp_path / "victim").read_text() == "original"
    assert not (tmp_path / "escaped").exists()


def test_the_copy_out_takes_its_limits_from_the_caller_never_the_environment(tmp_path, monkeypatch):
    """runner.settings reads TFTRAIN_MAX_ARCHIVE_*; the run hands them down (RunControl.archive_limits)."""
    monkeypatch.setenv("TFTRAIN_MAX_ARCHIVE_ENTRIES", "1")
    data = archive_bytes([directory("out"), entry("out/a", b"1"), entry("out/b", b"2")], compress=False)
    assert extract_into(io.BytesIO(data), tmp_path / "one", "/out of c", strip=1).files == 2
    with pytest.raises(RegistryError, match=r"more than 1 entries \(TFTRAIN_MAX_ARCHIVE_ENTRIES\)"):
        extract_into(io.BytesIO(data), tmp_path / "two", "/out of c", strip=1, limits=ArchiveLimits(max_entries=1))
    from runner.targets.base import RunControl

    assert RunControl("TFTRAIN_RUN_ID=demo-1", 1.0).archive_limits == ArchiveLimits()
