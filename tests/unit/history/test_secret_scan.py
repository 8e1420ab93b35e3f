"""A file holding a secret's value (a signing key kept in the source directory, a token a script
wrote out) is found, named, and never registered or packed for a release."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from runner.history.model_registry import Registry
from runner.history.packing import pack
from runner.history.regular import EntryKind
from runner.history.secret_scan import secret_files, secret_values, warning
from runner.history.store import Store

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6Pzclw/cn0ZzU2j0\n"
    + "x3j/xxDQHiRgdkTO5o1RoG9QLL\n-----END PRIVATE KEY-----\n"
)


def tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"graph" * 1000)
    (root / "key.pem").write_text(PEM)
    (root / "sub" / "rewrapped.pem").write_text(PEM.replace("\n", "\r\n"))  # the same key, other line ends
    (root / "sub" / "config.json").write_text(json.dumps({"token": "ghp_0123456789abcdef"}))
    (root / "short.txt").write_text("abc")  # a value too short to mean anything
    (root / "link.pem").symlink_to(root / "key.pem")  # never followed
    return root


def test_files_holding_a_secret_are_found_by_name_and_links_never_followed(tmp_path):
    found = secret_files(
        tree(tmp_path / "model"), {"MODEL_SIGNING_KEY": PEM, "TOKEN": "ghp_0123456789abcdef", "SHORT": "abc"}
    )
    assert found == {
        "key.pem": "MODEL_SIGNING_KEY",
        "sub/rewrapped.pem": "MODEL_SIGNING_KEY",
        "sub/config.json": "TOKEN",
    }
    assert secret_files(tmp_path / "model" / "key.pem", {"K": PEM}) == {"key.pem": "K"}
    assert secret_files(tmp_path / "model", {}) == {}


def test_a_value_split_across_read_chunks_is_found(tmp_path):
    from runner.history.checksums import CHUNK

    (tmp_path / "big.bin").write_bytes(b"\0" * (CHUNK - 5) + b"ghp_0123456789abcdef" + b"\0" * 10)
    assert secret_files(tmp_path, {"TOKEN": "ghp_0123456789abcdef"}) == {"big.bin": "TOKEN"}


def test_secret_values_include_the_withheld_signing_key():
    from runner.history import signing

    environ = {"SCAN_TEST_SIGNING_KEY": PEM, "OTHER": "x" * 10}
    signing.withhold("SCAN_TEST_SIGNING_KEY", environ)
    try:
        assert "SCAN_TEST_SIGNING_KEY" not in environ
        assert secret_values(["SCAN_TEST_SIGNING_KEY", "OTHER", "UNSET"], environ) == {
            "SCAN_TEST_SIGNING_KEY": PEM,
            "OTHER": "x" * 10,
        }
    finally:
        signing._withheld.pop("SCAN_TEST_SIGNING_KEY", None)


def test_a_withheld_file_is_never_registered_and_is_listed(tmp_path):
    model = tree(tmp_path / "model")
    withheld = frozenset(secret_files(model, {"MODEL_SIGNING_KEY": PEM}))
    version = Registry(Store(tmp_path / "home")).register("digits", model, None, {}, withheld=withheld)
    assert not (version.files_dir / "key.pem").exists() and not (version.files_dir / "sub" / "rewrapped.pem").exists()
    assert (version.files_dir / "saved_model.pb").is_file()
    assert {(item.path, item.kind) for item in version.skipped} >= {
        ("key.pem", EntryKind.SECRET),
        ("sub/rewrapped.pem", EntryKind.SECRET),
    }
    for path in version.path.rglob("*"):
        assert not path.is_file() or b"MIGHAgEAMBMGByqGSM49" not in path.read_bytes(), path
    assert "key.pem (file holding a secret's value)" in version.skipped_note("outputs/model")


def test_a_withheld_file_is_left_out_of_the_packed_model(tmp_path):
    model = tree(tmp_path / "model")
    pack(model, tmp_path / "model.tar.gz", frozenset({"key.pem", "sub/rewrapped.pem"}))
    with tarfile.open(tmp_path / "model.tar.gz") as archive:
        names = archive.getnames()
    assert "saved_model.pb" in names and "key.pem" not in names and "sub/rewrapped.pem" not in names


def test_the_warning_names_the_file_and_the_secret_never_its_value():
    line = warning("src", "key.pem", "MODEL_SIGNING_KEY")
    assert line.startswith("src/key.pem holds the value of the secret MODEL_SIGNING_KEY") and "\n" not in line
