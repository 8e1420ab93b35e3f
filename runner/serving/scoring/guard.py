"""The front door of a scoring script's server: a WSGI layer around Azure's inference server
(azmlinfsrv's Flask app), deciding which routes exist, who may call them and how large a body may
be before any of azmlinfsrv's or the script's code sees the request.

azmlinfsrv itself has no authentication (on Azure the endpoint in front of it checks the key), so
with `auth: true` this layer does what Azure's endpoint does: `Authorization: Bearer KEY` on every
route but the liveness probe `GET /`, compared in constant time by runner.serving.guard's own check.
Routes: `GET /` (liveness: it answers only once init() has run), `POST`/`GET /score`,
`GET /swagger.json`; anything else 404. A body over the limit is 413 (a declared Content-Length
before a byte is read; a chunked one once the count passes it). Errors are `{"message": ...}`, as
azmlinfsrv words its own. Standard library only.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from runner.serving.guard import Access, authorized

READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class ScoringRoute:
    methods: frozenset[str]
    access: Access


ROUTES = {
    "/": ScoringRoute(frozenset({"GET", "HEAD"}), Access.OPEN),
    "/score": ScoringRoute(frozenset({"GET", "POST"}), Access.KEY),
    "/swagger.json": ScoringRoute(frozenset({"GET"}), Access.KEY),
}


class ScoringGuard:
    """WSGI middleware: routes, bearer key, body limit, in that order."""

    def __init__(self, app, token: bytes | None, max_body: int) -> None:
        self.app, self.token, self.max_body = app, token, max_body

    def __call__(self, environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        route = ROUTES.get(path)
        if route is None:
            return answer(start_response, 404, f"no route {path[:200]}")
        if method not in route.methods:
            return answer(
                start_response, 405, f"{method[:20]} is not allowed here: use {'/'.join(sorted(route.methods))}"
            )
        if route.access is Access.KEY and not authorized(
            self.token, environ.get("HTTP_AUTHORIZATION", "").encode("latin-1")
        ):
            return answer(
                start_response, 401, "this route needs 'Authorization: Bearer KEY'", [("WWW-Authenticate", "Bearer")]
            )
        body = self.body(environ)
        if body is None:
            return answer(
                start_response,
                413,
                f"the body is larger than this server takes ({self.max_body} bytes)",
                [("Connection", "close")],
            )
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)

    def body(self, environ) -> bytes | None:
        """The whole body, at most max_body bytes; None when it is larger."""
        declared = environ.get("CONTENT_LENGTH", "").strip()
        if declared.isdigit() and (len(declared) > 18 or int(declared) > self.max_body):
            return None
        stream, chunks, size = environ.get("wsgi.input"), [], 0
        if stream is None:
            return b""
        while True:
            chunk = stream.read(min(READ_CHUNK, self.max_body + 1 - size))
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)


_CONFIGURED: list[
    tuple[bytes | None, int]
] = []  # (key, body limit): set in gunicorn's master, read in the worker it forks


def configure(token: bytes | None, max_body: int) -> None:
    _CONFIGURED[:] = [(token, max_body)]


def guarded(app) -> ScoringGuard:
    """`app` behind the guard, with what configure() was given (the server's entry calls it first)."""
    if not _CONFIGURED:
        raise RuntimeError(
            "the scoring guard was not configured: start the server with python -m runner.serving.scoring.server"
        )
    token, max_body = _CONFIGURED[0]
    return ScoringGuard(app, token, max_body)


def answer(start_response, status: int, message: str, extra: list[tuple[str, str]] = ()) -> list[bytes]:
    body = json.dumps({"message": message}).encode()
    reason = {401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large"}.get(
        status, "Error"
    )
    start_response(
        f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *extra]
    )
    return [body]
