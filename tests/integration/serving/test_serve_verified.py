"""`tftrain serve REF --verify-key PUBKEY` for real: a version signed at registration (OpenSSF model
signing) is served when its copy verifies; tampered, signed with another key, unsigned, or asked
keylessly, it is one line, exit 29, and nothing is built or started: the port stays free."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import serving_models
from conftest import TFTRAIN
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from serving_models import NAME, lasting_cache_path, register_version

saved_model = serving_models.saved_model
SECRET = "MODEL_SIGNING_KEY"


def pem_pair() -> tuple[str, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return private.decode(), key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def signed_version(home: Path, built, private: str | None):
    from runner.history.sealing import Seal

    run = home.parent / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps({"run_id": "r-1", "git": {"commit": "a" * 40, "dirty": False}}))
    seal = Seal(run / "run.json", run / "manifest.lock.yml", SECRET, environ={SECRET: private}) if private else None
    return register_version(home, built, seal=seal)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def environ(home: Path) -> dict[str, str]:
    return {**os.environ, "TFTRAIN_HOME": str(home), "TFTRAIN_CACHE_DIR": str(lasting_cache_path()), "COLUMNS": "200"}


def refused(home: Path, *options: str) -> subprocess.CompletedProcess:
    port = free_port()
    result = subprocess.run(
        [TFTRAIN, "serve", f"{NAME}@v1", "--port", str(port), *options],
        capture_output=True,
        text=True,
        env=environ(home),
        timeout=300,
    )
    assert port_free(port) and "is ready" not in result.stdout and "serving " not in result.stdout, result.stdout
    return result


def one_line(result, code: int, text: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0], result.stderr


@pytest.fixture
def keys(tmp_path):
    private, public = pem_pair()
    (tmp_path / "pub.pem").write_bytes(public)
    (tmp_path / "other.pem").write_bytes(pem_pair()[1])
    (tmp_path / "private.pem").write_text(private)
    return private, tmp_path / "pub.pem"


def test_a_signed_version_is_served_once_verified(saved_model, tmp_path, keys):
    private, public = keys
    home = tmp_path / "home"
    signed_version(home, saved_model, private)
    port = free_port()
    process = subprocess.Popen(
        [TFTRAIN, "serve", f"{NAME}@v1", "--port", str(port), "--verify-key", str(public)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environ(home),
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    try:
        deadline = time.monotonic() + 900
        while not any("is ready:" in line for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "".join(lines[-40:])
            time.sleep(0.2)
        said = "".join(lines)
        assert f"{NAME}@v1: model.sig verified with {public}" in said
        assert said.index("model.sig verified") < said.index("is ready:")
        import http.client

        features, expected = saved_model.probe()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(
            "POST",
            f"/v1/models/{NAME}:predict",
            json.dumps({"instances": features[:2].tolist()}),
            {"Content-Type": "application/json"},
        )
        answer = connection.getresponse()
        assert answer.status == 200
        np.testing.assert_allclose(json.loads(answer.read())["predictions"], expected[:2], atol=1e-5)
    finally:
        process.terminate()
        assert process.wait(60) == 0


def test_tampered_other_key_unsigned_and_keyless_are_refused_before_anything_starts(saved_model, tmp_path, keys):
    private, public = keys
    home = tmp_path / "home"
    model = signed_version(home, saved_model, private)
    other = tmp_path / "other.pem"
    one_line(
        refused(home, "--verify-key", str(other)), 29, f"model {NAME}@v1: model.sig was not made with the key {other}"
    )
    # keyless asked of a key-signed version: said before Sigstore is asked anything
    one_line(
        refused(home, "--verify-identity", "me@example.com", "--verify-issuer", "https://accounts.google.com"),
        29,
        "model.sig was signed with a key, not keylessly (Sigstore)",
    )

    # a served file changed, and the registry's own checksums changed with it: only the signature tells
    target = model.path / "serving" / "serving.json"
    document = json.loads(target.read_text())
    document["signature"] = "serve"
    target.write_text(json.dumps(document))
    info = json.loads((model.path / "version.json").read_text())
    import hashlib

    info["extras"]["serving/serving.json"] = hashlib.sha256(target.read_bytes()).hexdigest()
    (model.path / "version.json").write_text(json.dumps(info))
    from runner.history.store import Store

    with Store(home) as store:
        store.db.execute("UPDATE models SET info = ? WHERE name = ? AND version = 1", (json.dumps(info), NAME))
    one_line(
        refused(home, "--verify-key", str(public)),
        29,
        "the files are not what model.sig signed: changed: 'serving/serving.json'",
    )

    # model.sig replaced by a link to a valid one elsewhere: refused, not followed
    signature = model.path / "model.sig"
    kept = tmp_path / "kept.sig"
    signature.rename(kept)
    signature.symlink_to(kept)
    one_line(refused(home, "--verify-key", str(public)), 29, "model.sig is a symlink")
    signature.unlink()
    one_line(refused(home, "--verify-key", str(public)), 29, "model.sig is missing")


def test_an_extra_file_in_the_version_is_not_served_and_one_in_model_is_refused(saved_model, tmp_path, keys):
    private, public = keys
    home = tmp_path / "home"
    model = signed_version(home, saved_model, private)
    # beside model/, unknown to version.json: never copied out, so never served (the copy verifies)
    (model.path / "evil.py").write_text("print('owned')\n")
    # inside model/, with SHA256SUMS (which the signature does not cover) rewritten to name it
    (model.path / "model" / "assets").mkdir(exist_ok=True)
    (model.path / "model" / "assets" / "extra.txt").write_text("added\n")
    from runner.history.checksums import sums_of, write_sums

    write_sums(model.path / "SHA256SUMS", sums_of(model.path / "model"))
    one_line(refused(home, "--verify-key", str(public)), 29, "added (not signed): 'model/assets/extra.txt'")


def test_a_key_file_that_is_not_a_public_key_is_one_line_before_anything(tmp_path, keys):
    home = tmp_path / "home"  # no registry at all: the key is read first
    for bad, words in (
        (tmp_path / "private.pem", "not a PEM EC public key"),
        (tmp_path / "empty.pem", "not a PEM EC public key"),
        (tmp_path, "cannot read: not a regular file"),
        (Path("/dev/zero"), "cannot read: not a regular file"),
        (tmp_path / "absent.pem", "cannot read: No such file"),
    ):
        if bad.name == "empty.pem":
            bad.write_bytes(b"")
        one_line(refused(home, "--verify-key", str(bad)), 2, f"--verify-key {bad}: {words}")
    one_line(
        refused(home, "--verify-identity", "me@example.com"), 2, "--verify-identity and --verify-issuer go together"
    )
    assert not (home / "models").exists()


def test_keyless_verification_without_sigstore_is_one_line(tmp_path):
    """A keyless-looking signature asked keylessly: Sigstore's trust root cannot be fetched here."""
    from runner.errors import SignatureError
    from runner.history.signing import verify
    from runner.history.trust import SigstoreIdentity

    root = tmp_path / "version"
    (root / "model").mkdir(parents=True)
    (root / "model" / "saved_model.pb").write_bytes(b"graph")
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"certificate": {"rawBytes": "AAAA"}, "tlogEntries": []},
        "dsseEnvelope": {"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []},
    }
    (tmp_path / "model.sig").write_text(json.dumps(bundle))
    with pytest.raises(SignatureError) as raised:
        verify(
            root, tmp_path / "model.sig", SigstoreIdentity("me@example.com", "https://accounts.google.com"), "demo@v1"
        )
    message = str(raised.value)
    assert (
        message.startswith("Sigstore: keyless verification needs Sigstore's trust root")
        and "Nothing was verified" in message
    )
    assert "\n" not in message
