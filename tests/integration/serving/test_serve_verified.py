"""`tftrain serve --verify-key`: a real, signed, gated version (examples/keras-replay registered with
model.signing) is served only while its model.sig verifies it; with another key or without its
signature it is refused with exit 29 before any environment is built or port bound (a file changed in
the registry is caught earlier still, by its checksums: exit 6)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import pytest

from conftest import REPO, TFTRAIN
from serving_models import lasting_cache_path

KEY_VARIABLE = "TFTRAIN_TEST_SIGNING_KEY"


def keypair(root):
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(root / "key.pem")], check=True)
    subprocess.run(["openssl", "ec", "-in", str(root / "key.pem"), "-pubout", "-out", str(root / "pub.pem")], check=True, capture_output=True)
    return (root / "key.pem").read_text(), root / "pub.pem"


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    root = tmp_path_factory.mktemp("signed")
    private, public = keypair(root)
    _, other = keypair(tmp_path_factory.mktemp("other"))
    example = root / "example"
    shutil.copytree(REPO / "examples" / "keras-replay", example, ignore=shutil.ignore_patterns("outputs", "__pycache__"))
    manifest = example / "tftrain.yml"
    manifest.write_text(manifest.read_text().replace("model:\n", f"secrets: [{KEY_VARIABLE}]\nmodel:\n  signing: {{private_key_secret: {KEY_VARIABLE}}}\n", 1))
    env = {**os.environ, "TFTRAIN_HOME": str(root / "home"), "TFTRAIN_CACHE_DIR": str(lasting_cache_path()), KEY_VARIABLE: private}
    done = subprocess.run([TFTRAIN, "run", "-f", str(manifest)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    return root / "home", public, other, {key: value for key, value in env.items() if key != KEY_VARIABLE}


def serve(env, *args: str) -> tuple[subprocess.Popen, list[str]]:
    process = subprocess.Popen([TFTRAIN, "serve", "keras-replay@v1", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    return process, lines


def test_a_verified_version_is_served(signed):
    home, public, _, env = signed
    process, lines = serve(env, "--verify-key", str(public))
    try:
        deadline = time.monotonic() + 600
        while not any("is ready:" in line for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "".join(lines[-30:])
            time.sleep(0.2)
        assert any("model.sig verified with" in line for line in lines)
    finally:
        process.terminate()
        process.wait(60)


def refused(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TFTRAIN, "serve", "keras-replay@v1", "--port", "0", *args], capture_output=True, text=True, env=env, timeout=300)


def test_another_key_no_signature_or_no_key_is_refused_before_anything_starts(signed, tmp_path):
    home, public, other, env = signed
    wrong = refused(env, "--verify-key", str(other))
    assert wrong.returncode == 29 and "tftrain: error: model keras-replay@v1:" in wrong.stderr, wrong.stderr
    assert "building" not in wrong.stdout and "tftrain-serve: port" not in wrong.stdout and "Traceback" not in wrong.stderr
    version = home / "models" / "keras-replay" / "v1"
    signature = version / "model.sig"
    kept = signature.read_bytes()
    try:
        signature.unlink()
        unsigned = refused(env, "--verify-key", str(public))
        assert unsigned.returncode == 29 and "model.sig" in unsigned.stderr, unsigned.stderr
    finally:
        signature.write_bytes(kept)
    not_a_key = tmp_path / "key.pem"
    not_a_key.write_text("-----BEGIN PRIVATE KEY-----\nnope\n")
    bad = refused(env, "--verify-key", str(not_a_key))
    assert bad.returncode == 2 and "not a PEM EC public key" in bad.stderr


def test_a_release_ref_is_told_how_to_verify_it_first(signed):
    _, public, _, env = signed
    done = subprocess.run([TFTRAIN, "serve", "release:keras-replay@v1", "--verify-key", str(public)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 2 and "--verify-key checks a version of this home's registry" in done.stderr
