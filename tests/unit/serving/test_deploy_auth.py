"""The deploy smoke test's key check, against a loopback server: a server that enforces the bearer
key passes (readiness and predict carry the key, a predict without it is 401); one that answers
without the key, or with anything but 401, fails the deploy in one line naming the variable."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from runner.deploy import smoke as deploy
from runner.errors import DeployError
from runner.serving.guard import TOKEN_VARIABLE

KEY = "k3y-for-the-smoke-test"


@contextmanager
def server(without_key: int | None):
    """A v1 model server on loopback; `without_key`: its answer to a request without the key
    (None: it does not look at keys)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, body: dict) -> None:
            if without_key is not None and self.headers.get("Authorization") != f"Bearer {KEY}":
                body, code = {"error": "no key"}, without_key
            else:
                code = 200
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._answer({"model_version_status": [{"state": "AVAILABLE"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer({"predictions": [[0.25, 0.75]]})

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/models/digits"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.npz"
    np.savez(path, x=np.zeros((1, 8), dtype="float32"))
    return path


def test_a_server_that_enforces_the_key_passes(sample):
    with server(without_key=401) as url:
        deploy._wait_ready(None, url, 5, KEY)  # ready at once: the container is never looked at
        deploy._refuses_without_key(url)
        assert deploy._predict(url, sample, KEY) == [[0.25, 0.75]]
        with pytest.raises(DeployError, match="predict answered 401"):
            deploy._predict(url, sample, None)


@pytest.mark.parametrize("without_key", [None, 403, 500])
def test_a_server_that_does_not_enforce_it_fails_the_deploy(without_key):
    with server(without_key=without_key) as url, pytest.raises(DeployError) as raised:
        deploy._refuses_without_key(url)
    message = str(raised.value)
    assert "\n" not in message and f"answered {without_key or 200}, not 401" in message and TOKEN_VARIABLE in message
    assert KEY not in message
