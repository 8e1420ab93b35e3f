"""Keyless signing (Sigstore, the GitHub Actions job's OIDC identity), up to the call to Sigstore,
which cannot be reached from here: the job's token fetched from a GitHub stand-in on loopback,
handed to the library; each failure one line that names neither token."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from runner.errors import SignatureError, UsageError
from runner.history import signing
from runner.history.model_registry import Registry
from runner.history.sealing import Seal
from runner.history.store import Store
from runner.settings import resolve

REQUEST_TOKEN = "request-token-7f3a"
ID_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJzaWdzdG9yZSJ9.c2lnbmF0dXJl"


@pytest.fixture
def token_server():
    """GitHub's OIDC token endpoint as a job sees it: `answer` sets what it says."""
    state = {"status": 200, "body": json.dumps({"value": ID_TOKEN}).encode(), "seen": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["seen"].append((self.path, self.headers.get("Authorization")))
            self.send_response(state["status"])
            self.end_headers()
            self.wfile.write(state["body"])

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/_apis/token?api-version=2.0"
    yield state, {"ACTIONS_ID_TOKEN_REQUEST_URL": url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": REQUEST_TOKEN}
    server.shutdown()


@pytest.fixture
def sigstore_unreachable(monkeypatch):
    """The library boundary: what use_sigstore_signer is handed, and the error the real one raises
    here (its trust root cannot be fetched)."""
    import model_signing
    from sigstore.errors import TUFError

    calls = []

    def use_sigstore_signer(self, **kwargs):
        calls.append(kwargs)
        raise TUFError("Failed to refresh TUF metadata")

    monkeypatch.setattr(model_signing.signing.Config, "use_sigstore_signer", use_sigstore_signer)
    return calls


def model(tmp_path: Path) -> Path:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"w")
    return tmp_path / "m"


def test_the_jobs_token_is_handed_to_sigstore_and_an_unreachable_sigstore_is_one_line(
    tmp_path, token_server, sigstore_unreachable
):
    state, environ = token_server
    with pytest.raises(SignatureError) as caught:
        signing.sign_keyless(model(tmp_path), tmp_path / "model.sig", environ)
    message = str(caught.value)
    assert (
        message
        == "Sigstore: keyless signing failed: Failed to refresh TUF metadata (is Sigstore reachable from this runner?)"
    )
    assert sigstore_unreachable == [{"identity_token": ID_TOKEN}]  # never an interactive login
    path, authorization = state["seen"][0]
    assert path == "/_apis/token?api-version=2.0&audience=sigstore" and authorization == f"bearer {REQUEST_TOKEN}"
    assert not (tmp_path / "model.sig").exists()


def test_registration_fails_and_keeps_nothing_when_sigstore_is_out_of_reach(
    tmp_path, token_server, sigstore_unreachable
):
    _, environ = token_server
    registry = Registry(Store(tmp_path / "home"))
    seal = Seal(tmp_path / "run.json", tmp_path / "lock.yml", keyless=True, environ=environ)
    with pytest.raises(SignatureError, match="Sigstore"):
        registry.register("digits", model(tmp_path), None, {}, seal=seal)
    assert registry.versions() == [] and list((tmp_path / "home" / "models" / "digits").iterdir()) == []


@pytest.mark.parametrize(
    "status, body, words",
    [
        (403, b"{}", "GitHub: GET /_apis/token answered 403 Forbidden (the job's OIDC token)"),
        (200, b"not json", "answered no OIDC token"),
        (200, b'{"value": 7}', "answered no OIDC token"),
        (200, b'{"value": ""}', "answered no OIDC token"),
        (200, b'{"value": "' + b"x" * (70 << 10) + b'"}', "answered no OIDC token"),
    ],
)
def test_a_bad_token_answer_is_one_line(tmp_path, token_server, sigstore_unreachable, status, body, words):
    state, environ = token_server
    state["status"], state["body"] = status, body
    with pytest.raises(SignatureError) as caught:
        signing.sign_keyless(model(tmp_path), tmp_path / "model.sig", environ)
    assert (
        words in str(caught.value) and REQUEST_TOKEN not in str(caught.value) and "api-version" not in str(caught.value)
    )
    assert sigstore_unreachable == []


def test_without_id_token_permission_it_says_what_to_add(tmp_path, sigstore_unreachable):
    with pytest.raises(SignatureError, match="permissions: id-token: write"):
        signing.sign_keyless(model(tmp_path), tmp_path / "model.sig", {})


def test_a_token_endpoint_that_does_not_answer(tmp_path, sigstore_unreachable):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    environ = {
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"http://127.0.0.1:{port}/token",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": REQUEST_TOKEN,
    }
    with pytest.raises(SignatureError, match="GitHub: GET /token got no answer: Connection refused"):
        signing.sign_keyless(model(tmp_path), tmp_path / "model.sig", environ)


def test_the_action_input_turns_it_on():
    assert resolve({}).inputs.sign_keyless is False
    assert resolve({"INPUT_SIGN_KEYLESS": "true"}).inputs.sign_keyless is True
    assert resolve({"TFTRAIN_SIGN_KEYLESS": "false"}).inputs.sign_keyless is False
    with pytest.raises(UsageError, match="input sign-keyless"):
        resolve({"INPUT_SIGN_KEYLESS": "perhaps"})


def test_a_key_wins_over_keyless(tmp_path, sigstore_unreachable):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    seal = Seal(tmp_path / "run.json", tmp_path / "lock.yml", "KEY", keyless=True, environ={"KEY": pem})
    version = Registry(Store(tmp_path / "home")).register("digits", model(tmp_path), None, {}, seal=seal)
    assert version.info["signature"]["method"] == "key" and sigstore_unreachable == []
