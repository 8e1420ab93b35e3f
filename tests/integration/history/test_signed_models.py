"""Signed models for real: a tiny run registers a signed version (the key from the environment,
named by secrets:), OpenSSF's own `model_signing` CLI verifies it, `tftrain models verify` passes
it and fails it tampered, `models pull --verify-key` keeps nothing of a tampered one, the release
carries model.sig and provenance.intoto.json, and the key is nowhere tftrain wrote."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TFTRAIN

from runner.history.checksums import read_sums

pytestmark = pytest.mark.integration

KEY_VARIABLE = "TFTRAIN_TEST_SIGNING_KEY"
SCRIPT = """\
import os
os.makedirs("outputs/model/variables", exist_ok=True)
open("outputs/model/saved_model.pb", "wb").write(b"graph" * 100)
open("outputs/model/variables/variables.data", "wb").write(os.urandom(2048))
print("KEY SEEN BY THE TRAINING:", "TFTRAIN_TEST_SIGNING_KEY" in os.environ, flush=True)
print("loss=0.25", flush=True)
"""
MANIFEST = (
    f"secrets: [{KEY_VARIABLE}]\nmodel: {{gate: 'off', signing: {{private_key_secret: {KEY_VARIABLE}}}}}\nmetrics:"
    " {regex: {loss: 'loss=([0-9.]+)'}}\n"
)
OPENSSF = str(Path(sys.executable).with_name("model_signing"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[str, Path]:
    """An EC P-256 pair made as OpenSSF's README makes one: (private PEM text, public key file)."""
    root = tmp_path_factory.mktemp("keys")
    subprocess.run(
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(root / "key.pem")], check=True
    )
    subprocess.run(
        ["openssl", "ec", "-in", str(root / "key.pem"), "-pubout", "-out", str(root / "pub.pem")],
        check=True,
        capture_output=True,
    )
    private = (root / "key.pem").read_text()
    (root / "key.pem").unlink()  # from here on it lives in the environment only, as a CI secret does
    return private, root / "pub.pem"


def tftrain(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, env=env, timeout=300)


def openssf_verify(model: Path, signature: Path, public: Path) -> str:
    result = subprocess.run(
        [OPENSSF, "verify", "key", str(model), "--signature", str(signature), "--public_key", str(public)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout + result.stderr  # it exits 0 either way: its words say


@pytest.fixture
def signed(project, home, keys):
    private, _ = keys
    env = {**os.environ, KEY_VARIABLE: private}
    result = tftrain("run", "-f", str(project(script=SCRIPT, manifest=MANIFEST)), env=env)
    assert result.returncode == 0, result.stderr
    return home / "models" / "demo" / "v1", env, result


def test_a_registered_version_is_signed_and_openssf_verifies_it(signed, keys, tmp_path):
    version, env, run = signed
    _, public = keys
    assert "KEY SEEN BY THE TRAINING: False" in run.stdout  # tftrain's key, not the script's
    assert (version / "model.sig").is_file() and (version / "provenance.intoto.json").is_file()
    # the version's directory: model/ and what is served with it; version.json and the rest written after are left out by the signature's own list
    assert "Verification succeeded" in openssf_verify(version, version / "model.sig", public)

    result = tftrain("models", "verify", "demo@v1", "--public-key", str(public), env=env)
    assert result.returncode == 0 and "model.sig verified" in result.stdout, result.stderr

    statement = json.loads((version / "provenance.intoto.json").read_text())
    subjects = {item["name"]: item["digest"]["sha256"] for item in statement["subject"]}
    assert subjects == read_sums(version / "SHA256SUMS")
    build = statement["predicate"]["buildDefinition"]
    assert build["internalParameters"]["run_id"] == "demo-1"
    assert (
        build["externalParameters"]["manifest"]["sha256"]
        == hashlib.sha256((version.parents[3] / "project" / "tftrain.yml").read_bytes()).hexdigest()
    )
    assert build["externalParameters"]["target"] == "local"


def test_a_tampered_version_fails_both_verifiers_and_is_not_pulled(signed, keys, tmp_path):
    version, env, _ = signed
    _, public = keys
    (version / "model" / "saved_model.pb").write_bytes(b"evil")
    (version / "model" / "backdoor.py").write_text("import os")
    assert "Verification failed" in openssf_verify(version, version / "model.sig", public)

    result = tftrain("models", "verify", "demo@v1", "--public-key", str(public), env=env)
    assert result.returncode == 29 and "Traceback" not in result.stderr
    assert "changed: 'model/saved_model.pb'; added (not signed): 'model/backdoor.py'" in result.stderr

    result = tftrain("models", "pull", "demo@v1", "-o", str(tmp_path / "pulled"), "--verify-key", str(public), env=env)
    # SHA256SUMS or the signature: either refuses
    assert result.returncode in (6, 29) and not (tmp_path / "pulled").exists()


def test_a_removed_file_and_a_removed_signature_fail(signed, keys):
    version, env, _ = signed
    _, public = keys
    (version / "model" / "variables" / "variables.data").unlink()
    result = tftrain("models", "verify", "demo@v1", "--public-key", str(public), env=env)
    assert result.returncode == 29 and "removed: 'model/variables/variables.data'" in result.stderr
    (version / "model.sig").unlink()
    result = tftrain("models", "verify", "demo@v1", "--public-key", str(public), env=env)
    assert result.returncode == 29 and "model.sig is missing" in result.stderr


def test_the_key_is_nowhere_tftrain_wrote_or_printed(signed, keys, home):
    version, _, run = signed
    private, _ = keys
    body = "".join(private.strip().splitlines()[1:-1])
    for line in (private.strip().splitlines()[1], body[:40]):
        assert line not in run.stdout + run.stderr
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert body[:40].encode() not in data and private.strip().splitlines()[1].encode() not in data, path


def test_a_bad_key_fails_before_the_training_with_one_line(project, home):
    env = {**os.environ, KEY_VARIABLE: "-----BEGIN EC PRIVATE KEY-----\nnot really\n-----END EC PRIVATE KEY-----\n"}
    result = tftrain("run", "-f", str(project(script=SCRIPT, manifest=MANIFEST)), env=env)
    assert result.returncode == 29, result.stderr
    assert "KEY SEEN BY THE TRAINING" not in result.stdout  # refused before the script started
    errors = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error: ")]
    assert (
        len(errors) == 1
        and f"model.signing.private_key_secret: {KEY_VARIABLE} does not hold a PEM private key" in errors[0]
    )
    assert "not really" not in result.stdout + result.stderr
    assert not (home / "models" / "demo").exists() or not any((home / "models" / "demo").iterdir())


def test_the_release_carries_the_signature_and_the_provenance(project, home, keys, github_api, tmp_path):
    private, public = keys
    env = {
        **os.environ,
        KEY_VARIABLE: private,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=MANIFEST)), env=env).returncode == 0
    result = tftrain("publish", "--run", "demo-1", env=env)
    assert result.returncode == 0, result.stderr
    (release,) = github_api.releases
    names = {asset["name"] for asset in release["assets"]}
    assert {"model.sig", "provenance.intoto.json"} <= names
    assert "/releases/download/demo-v1/model.sig" in release["body"] and "provenance.intoto.json" in release["body"]

    result = tftrain("models", "verify", "demo@v1", "--from", "github", "--public-key", str(public), env=env)
    assert result.returncode == 0, result.stderr
    result = tftrain(
        "models",
        "pull",
        "demo@v1",
        "--from",
        "github",
        "-o",
        str(tmp_path / "pulled"),
        "--verify-key",
        str(public),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert read_sums(home / "models" / "demo" / "v1" / "SHA256SUMS") == {
        path.relative_to(tmp_path / "pulled").as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (tmp_path / "pulled").rglob("*")
        if path.is_file()
    }

    other = tmp_path / "other.pem"
    subprocess.run(
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(tmp_path / "k2.pem")], check=True
    )
    subprocess.run(
        ["openssl", "ec", "-in", str(tmp_path / "k2.pem"), "-pubout", "-out", str(other)],
        check=True,
        capture_output=True,
    )
    result = tftrain(
        "models",
        "pull",
        "demo@v1",
        "--from",
        "github",
        "-o",
        str(tmp_path / "refused"),
        "--verify-key",
        str(other),
        env=env,
    )
    assert result.returncode == 29 and "was not made with the key" in result.stderr
    assert not (tmp_path / "refused").exists()
    # served from the release: its model.sig (an asset, checked against SHA256SUMS) verifies the copy first
    result = tftrain("serve", "release:demo@v1", "--port", "0", "--verify-key", str(other), env=env)
    assert result.returncode == 29 and "model demo-v1: model.sig was not made with the key" in result.stderr, (
        result.stderr
    )
    assert "serving " not in result.stdout and "is ready" not in result.stdout


def test_a_model_changed_after_registration_is_not_published_with_its_signature(project, home, keys, github_api):
    private, _ = keys
    env = {
        **os.environ,
        KEY_VARIABLE: private,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=MANIFEST)), env=env).returncode == 0
    (home / "runs" / "demo-1" / "workdir" / "outputs" / "model" / "saved_model.pb").write_bytes(
        b"swapped after signing"
    )
    result = tftrain("publish", "--run", "demo-1", env=env)
    assert result.returncode == 17, result.stderr
    assert "the run's model changed since it was registered as demo@v1: its model.sig would not verify" in result.stderr
    assert all(release["draft"] for release in github_api.releases)  # nothing published


def test_an_unsigned_release_fails_verification_with_one_line(project, home, keys, github_api, tmp_path):
    _, public = keys
    env = {
        **os.environ,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest="model: {gate: 'off'}\n")), env=env).returncode == 0
    assert tftrain("publish", "--run", "demo-1", env=env).returncode == 0
    (release,) = github_api.releases
    assert "model.sig" not in {asset["name"] for asset in release["assets"]}
    assert "provenance.intoto.json" in {asset["name"] for asset in release["assets"]}
    result = tftrain("models", "verify", "demo@v1", "--from", "github", "--public-key", str(public), env=env)
    assert result.returncode == 29 and "release demo-v1 has no model.sig" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = tftrain(
        "models", "pull", "demo@v1", "--from", "github", "-o", str(tmp_path / "o"), "--verify-key", str(public), env=env
    )
    assert result.returncode == 29 and not (tmp_path / "o").exists()


def test_a_key_kept_in_the_source_directory_is_named_and_never_registered_or_published(project, home, keys, github_api):
    private, _ = keys
    script = SCRIPT + "import shutil\nshutil.copy('signing-key.pem', 'outputs/model/key-copy.pem')\n"
    manifest = project(script=script, manifest=MANIFEST)
    (manifest.parent / "src" / "signing-key.pem").write_text(private)  # kept beside the code, as it should not be
    env = {
        **os.environ,
        KEY_VARIABLE: private,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    result = tftrain("run", "-f", str(manifest), env=env)
    assert result.returncode == 0, result.stderr
    warnings = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if f"holds the value of the secret {KEY_VARIABLE}" in line
    ]
    assert any("signing-key.pem holds" in line for line in warnings) and any(
        "key-copy.pem holds" in line for line in warnings
    ), warnings
    version = home / "models" / "demo" / "v1"
    assert not (version / "model" / "key-copy.pem").exists()
    assert {"path": "key-copy.pem", "kind": "file holding a secret's value"} in json.loads(
        (version / "version.json").read_text()
    )["skipped"]
    result = tftrain("publish", "--run", "demo-1", env=env)
    assert result.returncode == 0, result.stderr
    import tarfile

    body = "".join(private.strip().splitlines()[1:-1])[:40].encode()
    (archive,) = [path for path in home.rglob("model.tar.gz") if "workdir" not in path.parts]
    with tarfile.open(archive) as packed:
        assert "saved_model.pb" in packed.getnames() and "key-copy.pem" not in packed.getnames()
    for path in home.rglob("*"):  # the run's snapshot holds it (the source did); no version or release asset does
        if path.is_file() and not path.is_symlink() and "workdir" not in path.parts:
            assert body not in path.read_bytes(), path


def test_a_version_signed_with_its_evidence_publishes_and_verifies_from_the_release(
    project, home, keys, github_api, monkeypatch, tmp_path
):
    """The evaluation's evidence is kept in the version (evaluation/), inside the signature: the release
    carries it (evaluation.json, evaluation-seed-N.jsonl) and `models verify --from github` lays it back
    where model.sig signed it."""
    from verdicts import keep_evidence, scores

    from runner.history.registration import register_finished

    private, public = keys
    env = {
        **os.environ,
        KEY_VARIABLE: private,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }
    manifest = MANIFEST.replace(
        "gate: 'off'", "gate: 'off', register: false"
    )  # registered below, with its evidence, as the seeds driver does
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=manifest)), env=env).returncode == 0
    extras = keep_evidence(home / "runs" / "demo-1", scores(0.9, 100, 2, 1))
    monkeypatch.setenv(KEY_VARIABLE, private)
    assert register_finished(home, "demo-1", {}, extras=extras) == "demo@v1"
    assert {"evaluation/evaluation.json", "evaluation/seed-1.jsonl"} <= set(
        json.loads((home / "models" / "demo" / "v1" / "version.json").read_text())["extras"]
    )

    result = tftrain("publish", "--run", "demo-1", env=env)
    assert result.returncode == 0, result.stderr
    (release,) = github_api.releases
    assert {"model.sig", "evaluation.json", "evaluation-seed-0.jsonl", "evaluation-seed-1.jsonl"} <= {
        asset["name"] for asset in release["assets"]
    }
    result = tftrain("models", "verify", "demo@v1", "--from", "github", "--public-key", str(public), env=env)
    assert result.returncode == 0, result.stderr
    result = tftrain(
        "models",
        "pull",
        "demo@v1",
        "--from",
        "github",
        "-o",
        str(tmp_path / "pulled"),
        "--verify-key",
        str(public),
        env=env,
    )
    assert result.returncode == 0, result.stderr
