"""The WSGI layer in front of azmlinfsrv, attacked with a stand-in app: unknown routes, wrong
methods, a missing, wrong or differently-cased key, bodies over the limit declared or not — each
answered before the app sees the request, one JSON line, never a traceback."""

from __future__ import annotations

import io
import json

import pytest

from runner.serving.scoring.guard import ScoringGuard

KEY = b"s3cret-key"


class App:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        self.bodies.append(body)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"echo": body.decode()}).encode()]


class Chunked(io.RawIOBase):
    """A body with no Content-Length (chunked), as long as asked."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return b"x" * n


def call(guard, path="/score", method="POST", body=b'{"data": [1]}', headers=None, declared=True, stream=None):
    environ = {"PATH_INFO": path, "REQUEST_METHOD": method, "wsgi.input": stream or io.BytesIO(body)}
    if declared:
        environ["CONTENT_LENGTH"] = str(len(body))
    environ.update({f"HTTP_{name.upper().replace('-', '_')}": value for name, value in (headers or {}).items()})
    answered = {}

    def start_response(status, headers):
        answered["status"], answered["headers"] = int(status.split()[0]), dict(headers)

    payload = b"".join(guard(environ, start_response))
    return answered["status"], json.loads(payload), answered["headers"]


@pytest.fixture
def app():
    return App()


def test_the_right_key_reaches_the_script_with_the_body(app):
    status, body, _ = call(ScoringGuard(app, KEY, 1024), headers={"Authorization": "Bearer s3cret-key"})
    assert (status, body) == (200, {"echo": '{"data": [1]}'})
    status, _, _ = call(
        ScoringGuard(app, KEY, 1024), headers={"Authorization": "bearer s3cret-key"}
    )  # the scheme in any case
    assert status == 200


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer wrong",
        "Bearer s3cret-ke",
        "Basic czNjcmV0LWtleQ==",
        "s3cret-key",
        "Bearer ",
        "Bearer s3cret-key-and-more",
    ],
)
def test_a_missing_or_wrong_key_is_401_and_the_script_never_runs(app, header):
    status, body, headers = call(ScoringGuard(app, KEY, 1024), headers={"Authorization": header} if header else {})
    assert status == 401 and body == {"message": "this route needs 'Authorization: Bearer KEY'"}
    assert headers["WWW-Authenticate"] == "Bearer" and app.bodies == []


def test_liveness_is_open_and_swagger_needs_the_key(app):
    guard = ScoringGuard(app, KEY, 1024)
    assert call(guard, "/", "GET", b"")[0] == 200
    assert call(guard, "/swagger.json", "GET", b"")[0] == 401
    assert call(guard, "/swagger.json", "GET", b"", headers={"Authorization": "Bearer s3cret-key"})[0] == 200


def test_no_key_leaves_score_open(app):
    assert call(ScoringGuard(app, None, 1024))[0] == 200


@pytest.mark.parametrize(
    "path, method, status",
    [
        ("/v2/repository/models/x/unload", "POST", 404),
        ("/score/../admin", "POST", 404),
        ("/", "DELETE", 405),
        ("/score", "PUT", 405),
        ("/swagger.json", "POST", 405),
    ],
)
def test_routes_outside_the_contract_are_refused_before_the_key(app, path, method, status):
    code, body, _ = call(ScoringGuard(app, KEY, 1024), path, method)
    assert code == status and set(body) == {"message"} and app.bodies == []


def test_a_declared_body_over_the_limit_is_413_unread(app):
    stream = Chunked(10**9)
    status, body, headers = call(ScoringGuard(app, None, 100), body=b"x" * 101, headers={}, stream=stream)
    assert status == 413 and "100 bytes" in body["message"] and headers["Connection"] == "close"
    assert stream.left == 10**9 and app.bodies == []  # not a byte read
    assert (
        call(ScoringGuard(app, None, 100), headers={}, body=b"", stream=stream, declared=False, path="/score")[0] == 413
    )  # Content-Length absent
    huge = {"PATH_INFO": "/score", "REQUEST_METHOD": "POST", "wsgi.input": io.BytesIO(), "CONTENT_LENGTH": "9" * 40}
    statuses = []
    ScoringGuard(app, None, 100)(huge, lambda status, headers: statuses.append(status))
    assert statuses == ["413 Content Too Large"]


def test_an_undeclared_body_is_read_only_to_one_byte_past_the_limit(app):
    stream = Chunked(10**9)
    status, _, _ = call(ScoringGuard(app, None, 1000), stream=stream, declared=False)
    assert status == 413 and stream.left == 10**9 - 1001


def test_a_body_at_the_limit_passes_whole(app):
    status, body, _ = call(ScoringGuard(app, None, 13))
    assert status == 200 and body == {"echo": '{"data": [1]}'}


def test_the_worker_builds_the_guard_from_what_the_master_configured(app, monkeypatch):
    from runner.serving.scoring import guard as scoring_guard

    monkeypatch.setattr(scoring_guard, "_CONFIGURED", [])
    with pytest.raises(RuntimeError, match="not configured"):
        scoring_guard.guarded(app)  # never an open server by accident
    scoring_guard.configure(KEY, 5)
    guard = scoring_guard.guarded(app)
    assert (guard.token, guard.max_body) == (KEY, 5)
    assert call(guard, headers={"Authorization": "Bearer s3cret-key"})[0] == 413
