"""Signed versions: model.sig at registration (OpenSSF model signing, its Python API), verified by
`tftrain models verify` and `models pull --verify-key`; every way a version can differ from what
was signed is one line and exit code 29; the key is never written anywhere."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from runner.errors import SignatureError
from runner.history import signing
from runner.history.model_registry import Registry
from runner.history.sealing import Seal, pull_verified, verify_version
from runner.history.store import Store

SECRET = "MODEL_SIGNING_KEY"


def pem_pair(curve=ec.SECP256R1()) -> tuple[str, bytes]:
    key = ec.generate_private_key(curve)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private.decode(), public


@pytest.fixture
def keys(tmp_path):
    private, public = pem_pair()
    (tmp_path / "pub.pem").write_bytes(public)
    return private, tmp_path / "pub.pem"


def make_model(root: Path) -> Path:
    model = root / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.data").write_bytes(b"weights")
    (model / ".gitignore").write_bytes(b"*.tmp\n")  # git's files are signed too
    return model


def register(tmp_path: Path, private: str | None, run: dict | None = None) -> tuple[Registry, object]:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(
        json.dumps(run or {"run_id": "digits-1", "git": {"commit": "a" * 40, "dirty": False}})
    )
    registry = Registry(Store(tmp_path / "home"))
    seal = Seal(
        run_dir / "run.json",
        run_dir / "manifest.lock.yml",
        SECRET if private is not None else None,
        environ={SECRET: private} if private else {},
    )
    return registry, registry.register("digits", make_model(tmp_path / "out"), "digits-1", {}, seal=seal)


def test_a_signed_version_verifies_and_says_how_it_was_signed(tmp_path, keys):
    private, public = keys
    _, model = register(tmp_path, private)
    assert (model.path / "model.sig").is_file()
    signature = model.info["signature"]
    assert signature["method"] == "key" and signature["file"] == "model.sig"
    assert signature["public_key_sha256"] == signing.public_key_sha256(
        serialization.load_pem_private_key(private.encode(), None)
    )
    verify_version(model, public)
    signed = signing.signed_files(model.path / "model.sig")
    assert sorted(signed) == ["model/.gitignore", "model/saved_model.pb", "model/variables/variables.data"]


@pytest.mark.parametrize(
    "tamper, words",
    [
        (lambda m: (m / "saved_model.pb").write_bytes(b"evil"), "changed: 'model/saved_model.pb'"),
        (lambda m: (m / "extra.py").write_bytes(b"import os"), "added (not signed): 'model/extra.py'"),
        (lambda m: (m / "variables" / "variables.data").unlink(), "removed: 'model/variables/variables.data'"),
        (lambda m: (m / ".gitignore").write_bytes(b"changed"), "changed: 'model/.gitignore'"),
        (
            lambda m: (m / ".git").mkdir() or (m / ".git" / "config").write_bytes(b"x"),
            "added (not signed): 'model/.git/config'",
        ),
    ],
)
def test_a_changed_added_or_removed_file_fails(tmp_path, keys, cli, home, tamper, words):
    private, public = keys
    _, model = register(home.parent, private)
    tamper(model.files_dir)
    with pytest.raises(SignatureError, match="the files are not what model.sig signed") as caught:
        verify_version(model, public)
    assert words in str(caught.value)
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == SignatureError.exit_code == 29
    assert result.stderr.count("\n") == 1 and words in result.stderr and "Traceback" not in result.stderr


def test_the_cli_passes_an_intact_version(home, keys, cli):
    private, public = keys
    register(home.parent, private)
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == 0, result.stderr
    assert "model.sig verified" in result.stdout


def signature_cases():
    def forged(sig: Path):  # a payload that names other digests, its signature left as it was
        bundle = json.loads(sig.read_text())
        payload = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
        payload["predicate"]["resources"][0]["digest"] = "0" * 64
        bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
        sig.write_text(json.dumps(bundle))

    return [
        (lambda sig: sig.unlink(), "model.sig is missing"),
        (lambda sig: sig.write_bytes(os.urandom(200)), "model.sig is not a model signature"),
        (lambda sig: sig.write_text('{"mediaType": 1}'), "model.sig is not a model signature"),
        (lambda sig: sig.write_text("[]"), "model.sig is not a model signature"),
        (lambda sig: sig.write_text(""), "model.sig is not a model signature"),
        (forged, "was not made with the key"),
        (lambda sig: sig.unlink() or sig.mkdir(), "model.sig is a directory"),
        (lambda sig: sig.unlink() or os.mkfifo(sig), "model.sig is a FIFO"),
        (lambda sig: sig.unlink() or sig.symlink_to("/etc/passwd"), "model.sig is a symlink"),
    ]


@pytest.mark.parametrize("damage, words", signature_cases())
def test_a_missing_or_garbage_signature_fails(home, keys, cli, damage, words):
    private, public = keys
    _, model = register(home.parent, private)
    damage(model.path / "model.sig")
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == 29, result.stderr
    assert words in result.stderr and result.stderr.count("\n") == 1


def test_another_key_fails(home, keys, cli, tmp_path):
    private, _ = keys
    register(home.parent, private)
    (tmp_path / "other.pem").write_bytes(pem_pair()[1])
    result = cli("models", "verify", "digits@v1", "--public-key", str(tmp_path / "other.pem"))
    assert result.returncode == 29 and "was not made with the key" in result.stderr


def test_an_unsigned_version_fails_and_a_bad_public_key_is_a_usage_error(home, keys, cli, tmp_path):
    _, public = keys
    register(home.parent, None)
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == 29 and "model.sig is missing" in result.stderr
    (tmp_path / "bad.pem").write_text("not a key")
    for bad in (tmp_path / "bad.pem", tmp_path / "absent.pem", keys[1].parent):
        result = cli("models", "verify", "digits@v1", "--public-key", str(bad))
        assert result.returncode == 2 and "--public-key" in result.stderr and result.stderr.count("\n") == 1


def test_odd_entries_are_refused_before_hashing(tmp_path, keys):
    private, public = keys
    _, model = register(tmp_path, private)
    os.mkfifo(model.files_dir / "pipe")  # the library would block reading it
    (model.files_dir / "link").symlink_to("/etc/passwd")
    with pytest.raises(SignatureError, match="is a FIFO.*is a symlink|is a symlink.*is a FIFO"):
        verify_version(model, public)


def test_pull_verify_key_keeps_nothing_of_a_tampered_version(tmp_path, keys, home, cli):
    private, public = keys
    _, model = register(home.parent, private)
    pull_verified(model, tmp_path / "good", public)
    assert sorted(p.name for p in (tmp_path / "good").iterdir()) == [".gitignore", "saved_model.pb", "variables"]
    (model.files_dir / "saved_model.pb").write_bytes(b"evil")
    sums = model.path / "SHA256SUMS"  # rewritten to match: only the signature can tell
    sums.write_text(sums.read_text().replace(hashlib.sha256(b"graph").hexdigest(), hashlib.sha256(b"evil").hexdigest()))
    result = cli("models", "pull", "digits@v1", "-o", str(tmp_path / "bad"), "--verify-key", str(public))
    assert result.returncode == 29 and "changed: 'model/saved_model.pb'" in result.stderr
    assert not (tmp_path / "bad").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bad")] == []  # no staging left either


def test_pull_verify_key_into_an_empty_directory_and_a_usage_error_first(tmp_path, keys, home, cli):
    private, public = keys
    register(home.parent, private)
    (tmp_path / "empty").mkdir()
    result = cli("models", "pull", "digits@v1", "-o", str(tmp_path / "empty"), "--verify-key", str(public))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "empty" / "saved_model.pb").read_bytes() == b"graph"
    result = cli(
        "models", "pull", "digits@v1", "-o", str(tmp_path / "other"), "--verify-key", str(tmp_path / "nope.pem")
    )
    assert result.returncode == 2 and not (tmp_path / "other").exists()


@pytest.mark.parametrize(
    "damage, words", [("huge", "larger than 256 MiB"), ("fifo", "is a FIFO"), ("gone", "is missing")]
)
def test_pull_verify_key_refuses_an_odd_signature_before_copying_it(tmp_path, keys, damage, words):
    private, public = keys
    _, model = register(tmp_path, private)
    signature = model.path / signing.SIGNATURE
    signature.unlink()
    if damage == "huge":  # sparse: no disk used, but no copy of it should be made either
        with open(signature, "wb") as handle:
            handle.truncate(signing.MAX_SIGNATURE_BYTES + 1)
    elif damage == "fifo":
        os.mkfifo(signature)
    with pytest.raises(SignatureError, match=words):
        pull_verified(model, tmp_path / "pulled", public)
    assert not (tmp_path / "pulled").exists()


# --- keys -------------------------------------------------------------------------------------


def _encrypted() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    ).decode()


def _rsa() -> str:
    key = rsa.generate_private_key(65537, 2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.mark.parametrize(
    "value, words",
    [
        ("", "is empty"),
        ("   \n", "is empty"),
        (
            "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n",
            "does not hold a PEM private key",
        ),
        ("password123", "does not hold a PEM private key"),
        ("A" * (70 << 10), "more than 64 KiB"),
        (_encrypted(), "encrypted key"),
        (_rsa(), "RSAPrivateKey key: model signing takes an EC key"),
        (pem_pair(ec.SECP256K1())[0], "on secp256k1"),
    ],
    # ids of their own: the generated keys differ in each pytest-xdist worker, which must collect the same tests
    ids=["empty", "blank", "not-base64", "no-pem", "too-long", "encrypted", "rsa", "secp256k1"],
)
def test_a_bad_key_is_one_line_that_never_shows_it(tmp_path, value, words):
    with pytest.raises(SignatureError) as caught:
        register(tmp_path, value or " ")  # " ": an empty secret is "not set"; a blank one is "empty"
    message = str(caught.value)
    assert words in message and f"private_key_secret: {SECRET}" in message and "\n" not in message
    assert value.strip()[:40] not in message or not value.strip()
    assert not (tmp_path / "home" / "models" / "digits" / "v1").exists()  # nothing registered
    assert Registry(Store(tmp_path / "home")).versions() == []


def test_a_key_that_is_not_set_fails_registration(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    seal = Seal(run_dir / "run.json", run_dir / "manifest.lock.yml", SECRET, environ={})
    with pytest.raises(SignatureError, match=f"{SECRET} is not set in tftrain's environment"):
        Registry(Store(tmp_path / "home")).register("digits", make_model(tmp_path / "out"), None, {}, seal=seal)


def test_the_key_is_written_nowhere(tmp_path, keys):
    private, _ = keys
    _, model = register(tmp_path, private)
    body = "".join(private.splitlines()[1:-1])  # the base64 between the PEM lines
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert body[:32].encode() not in data and private.encode() not in data, path
    assert "PRIVATE" not in json.dumps(model.info)


def test_deploy_verify_key_refuses_before_the_daemon_is_asked(home, keys, cli, tmp_path, monkeypatch):
    import runner.environments

    private, public = keys
    _, model = register(home.parent, private)
    monkeypatch.setattr(
        runner.environments,
        "docker_client",
        lambda: pytest.fail("the daemon was asked before the signature was checked"),
    )
    (model.files_dir / "saved_model.pb").write_bytes(b"evil")
    sums = model.path / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(hashlib.sha256(b"graph").hexdigest(), hashlib.sha256(b"evil").hexdigest()))
    result = cli("deploy", "digits@v1", "--image", "localhost:5000/digits", "--verify-key", str(public))
    assert (
        result.returncode == 29
        and "changed: 'model/saved_model.pb'" in result.stderr
        and result.stderr.count("\n") == 1
    )
    (model.path / "model.sig").unlink()
    result = cli("deploy", "digits@v1", "--image", "localhost:5000/digits", "--verify-key", str(public))
    assert result.returncode == 29 and "model.sig is missing" in result.stderr
    result = cli(
        "deploy", "digits@v1", "--image", "localhost:5000/digits", "--verify-key", str(tmp_path / "absent.pem")
    )
    assert result.returncode == 2 and "absent.pem" in result.stderr
