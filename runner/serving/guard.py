"""The model server's front door, an ASGI layer outside everything else: which routes exist, who
may call them, and how large a body may be — decided before any of KServe's code sees the request.

Routes: the model's own (predict, infer, status, metadata), health, and /openapi.json and /docs
only when asked for; every other path (KServe's model repository `/v2/repository/...`, which can
unload the model, /metrics, the docs) answers 404. With a token (TFTRAIN_SERVING_TOKEN), every route
but health needs `Authorization: Bearer TOKEN`, compared in constant time; 401 otherwise. A body
over the limit is 413: a declared Content-Length before a byte of it is read, a chunked one as soon
as the count passes the limit; the connection is closed after.

The standard library only: `tftrain serve` checks the token with it before starting the server.
"""

from __future__ import annotations

import asyncio
import ctypes
import enum
import hmac
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

TOKEN_VARIABLE = "TFTRAIN_SERVING_TOKEN"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024  # a batch of ~6 million numbers as JSON
TRIM_AFTER_BYTES = 8 * 1024 * 1024  # a body this large leaves freed memory worth handing back


class Access(enum.Enum):
    OPEN = "open"  # health: a probe carries no key
    KEY = "key"  # the bearer token, when the server has one


@dataclass(frozen=True)
class Route:
    methods: frozenset[str]
    access: Access


def routes(name: str, openapi: bool) -> dict[str, Route]:
    """Every path the server answers for the model `name`; anything else is 404."""
    get, post = frozenset({"GET", "HEAD"}), frozenset({"POST"})
    table = {
        "/": Route(get, Access.OPEN),
        "/v2/health/live": Route(get, Access.OPEN),
        "/v2/health/ready": Route(get, Access.OPEN),
        f"/v1/models/{name}": Route(get, Access.OPEN),  # TensorFlow Serving's status: what its probes ask
        f"/v2/models/{name}/ready": Route(get, Access.OPEN),
        f"/v1/models/{name}:predict": Route(post, Access.KEY),
        f"/v1/models/{name}/metadata": Route(get, Access.KEY),
        "/v2": Route(get, Access.KEY),
        f"/v2/models/{name}": Route(get, Access.KEY),
        f"/v2/models/{name}/infer": Route(post, Access.KEY),
    }
    if openapi:
        table["/openapi.json"] = Route(get, Access.KEY)
        table["/docs"] = Route(get, Access.KEY)
    return table


def check_token(token: str, where: str) -> bytes:
    """The token as the header will carry it; ValueError naming `where` for one no header can carry."""
    if not token.strip():
        raise ValueError(f"{where} is empty: set it to the key clients send as 'Authorization: Bearer KEY'")
    if not all(33 <= ord(char) <= 126 for char in token):
        raise ValueError(f"{where} holds characters a header cannot carry: use printable ASCII, no spaces")
    return token.encode("ascii")


def token_from(environ: dict[str, str]) -> bytes | None:
    """The bearer token from TFTRAIN_SERVING_TOKEN, taken out of the environment (nothing started
    later inherits it); None when it is not set. Never from argv: argv is visible in ps."""
    token = environ.pop(TOKEN_VARIABLE, None)
    return None if token is None else check_token(token, TOKEN_VARIABLE)


def server_token(environ: dict[str, str], max_body_bytes: int) -> bytes | None:
    """What a model server (KServe's or a scoring script's) checks before it starts: the body limit
    it was given, and its bearer token (token_from). ValueError: one line for its error exit."""
    token = token_from(environ)
    if max_body_bytes < 1:
        raise ValueError(f"--max-body-bytes {max_body_bytes}: give a number of bytes ≥ 1")
    return token


def authorized(token: bytes | None, header: bytes) -> bool:
    """No token, or `Bearer TOKEN` (the scheme in any case), compared in constant time."""
    if token is None:
        return True
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)


class Guard:
    """ASGI middleware: routes, bearer token and body limit, in that order."""

    def __init__(self, app, table: dict[str, Route], token: bytes | None, max_body: int) -> None:
        self.app, self.table, self.max_body, self.token = app, table, max_body, token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = self.table.get(scope["path"])
        if route is None:
            await _answer(send, 404, {"error": f"no route {scope['path'][:200]}"})
            return
        if scope["method"] not in route.methods:
            await _answer(
                send, 405, {"error": f"{scope['method']} is not allowed here: use {'/'.join(sorted(route.methods))}"}
            )
            return
        headers = _headers(scope)
        if route.access is Access.KEY and not self.authorized(headers.get(b"authorization", b"")):
            await _answer(
                send, 401, {"error": "this route needs 'Authorization: Bearer KEY'"}, [(b"www-authenticate", b"Bearer")]
            )
            return
        body = await self.body(headers, receive, send)
        if body is not None:
            await self.app(scope, _replay(body, receive), send)
            if len(body) >= TRIM_AFTER_BYTES:
                await asyncio.to_thread(release_memory)

    def authorized(self, header: bytes) -> bool:
        return authorized(self.token, header)

    async def body(self, headers: Mapping[bytes, bytes], receive, send) -> bytes | None:
        """The whole body, at most max_body bytes; None when answered (413) or the client left."""
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit() and (len(declared) > 18 or int(declared) > self.max_body):  # 19 digits: past any limit
            await self.too_large(send)
            return None
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                chunks.clear()
                await self.too_large(send)
                await asyncio.to_thread(release_memory)
                return None
            if chunk:
                chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def too_large(self, send) -> None:
        await _answer(
            send,
            413,
            {"error": f"the body is larger than this server takes ({self.max_body} bytes)"},
            [(b"connection", b"close")],
        )


def _headers(scope) -> dict[bytes, bytes]:
    """Header names lower-cased; a header given twice keeps its first value (a second
    Authorization cannot replace the first)."""
    headers: dict[bytes, bytes] = {}
    for key, value in scope.get("headers", ()):
        headers.setdefault(key.lower(), value)
    return headers


def _replay(body: bytes, receive) -> Callable[[], Awaitable[dict]]:
    """A receive() that hands the app the body read already, then waits on the client as before."""
    sent = False

    async def replayed() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send, status: int, payload: dict[str, Any], extra: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def release_memory() -> None:
    """Hand the heap's free pages back to the system (glibc keeps them after a large body is
    freed: the server's RSS would stay at its peak); nothing where malloc_trim does not exist."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _malloc_trim():
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)  # the process's own symbols: libc's, where it is glibc
    except OSError:
        return None


_MALLOC_TRIM = _malloc_trim()
