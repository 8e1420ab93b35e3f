"""Verified serving's pure parts: the InferenceService's init container (present with --verify-key,
absent without, the PEM carried as an env value, no secret), whom the command line trusts, and the
verifier's entry point on a signed version (intact: 0; otherwise one line and exit 29)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from runner.errors import SignatureError, UsageError
from runner.history import signing
from runner.history.trust import SignerKey, SigstoreIdentity, method_problem, trusted_from
from runner.serving.image import ServingResources
from runner.serving.inference_service import ServiceSpec, to_yaml
from runner.serving.verify_model import INIT_CONTAINER, KEY_VARIABLE, Verifier, main

IMAGE = "r.example/team/digits@sha256:" + "a" * 64


def pem_pair() -> tuple[str, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return private.decode(), key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def spec(verifier: Verifier | None, auth: str | None = None) -> ServiceSpec:
    return ServiceSpec(
        "digits", "serving", IMAGE, ServingResources("2", "1Gi", 1), {"tftrain/version": "v1"}, auth, verifier
    )


def test_the_init_container_is_rendered_only_with_a_verifier_and_carries_the_public_key():
    private, public = pem_pair()
    assert "initContainers" not in spec(None).document()["spec"]["predictor"]
    document = spec(Verifier.of(SignerKey(public, "pub.pem"), "digits"), auth="serving-key").document()
    (init,) = document["spec"]["predictor"]["initContainers"]
    assert init["name"] == INIT_CONTAINER and init["image"] == IMAGE  # the server's image, by the same digest
    assert init["command"] == [
        "python",
        "-m",
        "runner.serving.verify_model",
        "--model-dir",
        "/models/digits",
        "--public-key-env",
        KEY_VARIABLE,
    ]
    assert init["env"] == [{"name": KEY_VARIABLE, "value": public.decode()}]
    assert init["resources"]["limits"] == {"cpu": "2", "memory": "1Gi"}  # no GPU for hashing
    rendered = to_yaml(document)
    assert yaml.safe_load(rendered) == document
    # nothing secret in the document: no private key, and the server's key only by its secret's name
    assert "PRIVATE KEY" not in rendered and private.splitlines()[1] not in rendered
    (server,) = document["spec"]["predictor"]["containers"]
    assert server["env"] == [
        {"name": "TFTRAIN_SERVING_TOKEN", "valueFrom": {"secretKeyRef": {"name": "serving-key", "key": "token"}}}
    ]


def test_a_keyless_verifier_names_the_identity_and_issuer():
    init = Verifier.of(
        SigstoreIdentity("me@example.com", "https://token.actions.githubusercontent.com"), "digits"
    ).container(IMAGE, {})
    assert init["command"][-4:] == [
        "--identity",
        "me@example.com",
        "--issuer",
        "https://token.actions.githubusercontent.com",
    ]
    assert "env" not in init


def test_whom_to_trust_is_checked_before_anything(tmp_path):
    private, public = pem_pair()
    (tmp_path / "pub.pem").write_bytes(public)
    (tmp_path / "private.pem").write_text(private)
    (tmp_path / "empty.pem").write_bytes(b"")
    assert trusted_from(None, None, None, "--verify-key") is None
    assert trusted_from(tmp_path / "pub.pem", None, None, "--verify-key").pem == public
    for bad in ("private.pem", "empty.pem", ".", "/dev/zero"):
        with pytest.raises(UsageError, match=r"^--verify-key "):
            trusted_from(tmp_path / bad, None, None, "--verify-key")
    with pytest.raises(UsageError, match="go together"):
        trusted_from(None, "me@example.com", None, "--verify-key")
    with pytest.raises(UsageError, match="give one of them"):
        trusted_from(tmp_path / "pub.pem", "me@example.com", "https://accounts.google.com", "--verify-key")
    with pytest.raises(UsageError, match="of one line"):
        trusted_from(None, "me@example.com\nX", "https://accounts.google.com", "--verify-key")


def test_a_signature_made_the_other_way_is_refused_by_its_bundle(tmp_path):
    keyed = tmp_path / "keyed.sig"
    keyed.write_text(json.dumps({"verificationMaterial": {"publicKey": {"hint": "x"}}}))
    certified = tmp_path / "certified.sig"
    certified.write_text(json.dumps({"verificationMaterial": {"certificate": {"rawBytes": "AAAA"}}}))
    identity, key = SigstoreIdentity("me@example.com", "https://accounts.google.com"), SignerKey(b"", "pub.pem")
    assert "signed with a key, not keylessly" in method_problem(keyed, identity)
    assert "signed keylessly (Sigstore), not with a key" in method_problem(certified, key)
    assert method_problem(keyed, key) is None and method_problem(certified, identity) is None
    (tmp_path / "garbage.sig").write_bytes(b"\0not json")
    assert method_problem(tmp_path / "garbage.sig", key) is None  # the library says what it is


@pytest.fixture
def signed(tmp_path) -> tuple[Path, str, bytes]:
    private, public = pem_pair()
    root = tmp_path / "version"
    (root / "model" / "variables").mkdir(parents=True)
    (root / "model" / "saved_model.pb").write_bytes(b"graph")
    (root / "serving").mkdir()
    (root / "serving" / "serving.json").write_text("{}")
    signing.sign_with_key(root, root / signing.SIGNATURE, private, "KEY")
    return root, private, public


def test_the_verifier_passes_an_intact_version_and_refuses_in_one_line(signed, monkeypatch, capsys):
    root, private, public = signed
    monkeypatch.setenv(KEY_VARIABLE, public.decode())
    assert main(["--model-dir", str(root), "--public-key-env", KEY_VARIABLE]) == 0
    assert "is what model.sig signed" in capsys.readouterr().out

    def refused(code: int, words: str, *argv: str) -> None:
        assert main(["--model-dir", str(root), *(argv or ("--public-key-env", KEY_VARIABLE))]) == code
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err

    (root / "serving" / "serving.json").write_text('{"x": 1}')
    refused(SignatureError.exit_code, "changed: 'serving/serving.json'")
    (root / "serving" / "serving.json").write_text("{}")
    (root / "model" / "extra").write_bytes(b"")
    refused(SignatureError.exit_code, "added (not signed): 'model/extra'")
    (root / "model" / "extra").unlink()
    monkeypatch.setenv(KEY_VARIABLE, pem_pair()[1].decode())
    refused(SignatureError.exit_code, "was not made with the key $TFTRAIN_MODEL_PUBLIC_KEY")
    monkeypatch.setenv(KEY_VARIABLE, private)
    refused(UsageError.exit_code, f"${KEY_VARIABLE}: not a PEM EC public key")
    monkeypatch.delenv(KEY_VARIABLE)
    refused(UsageError.exit_code, "is not set")
    refused(UsageError.exit_code, "give one of", "--identity", "me@example.com")
    sig = root / signing.SIGNATURE
    sig.rename(root.parent / "elsewhere.sig")
    sig.symlink_to(root.parent / "elsewhere.sig")
    monkeypatch.setenv(KEY_VARIABLE, public.decode())
    refused(SignatureError.exit_code, "model.sig is a symlink")
    sig.unlink()
    refused(SignatureError.exit_code, "model.sig is missing")
