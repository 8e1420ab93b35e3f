"""The scoring server's front: an asyncio HTTP layer on the public port, in front of gunicorn's one
sync worker (which serves one connection at a time and would wait on a silent client for as long as
its timeout, 300 s, with every other client queued behind it).

Every connection is read here, concurrently, until its request is whole — headers within
HEADER_SECONDS, and no read of it idle for more than IDLE_SECONDS — and only then handed to the
worker (over a Unix socket) as one complete request: a slow or silent client costs a coroutine,
never the worker. A client that is too slow is dropped (408). The liveness probe `GET /` is
answered here once the worker has booted (init() done), never queued behind a /score. A body over
the limit is 413 before it is read (declared) or once it passes the limit (chunked); a chunked body
reaches the worker with its Content-Length. The worker's answer is read whole, then written to the
client at the client's pace; an HTTP/1.1 client's connection is kept for its next request (the
worker's own is not: it serves one request a connection) and closed after KEEP_ALIVE_SECONDS idle.
Standard library only.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from dataclasses import dataclass

from runner.serving.recording import http_answer
from runner.serving.records import Route

HEADER_SECONDS = 10.0  # the request line and headers, whole
IDLE_SECONDS = 10.0  # any read of the body, or any write of the answer, that makes no progress
KEEP_ALIVE_SECONDS = 5.0  # a kept connection's next request, headers whole (uvicorn keeps one 5 s)
MAX_HEAD_BYTES = 64 * 1024
READ_BYTES = 1 << 16
BACKEND_QUEUE = 64  # requests handed to the worker at once (the rest wait here, not in its backlog)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"transfer-encoding",
        b"content-length",
        b"expect",
        b"te",
        b"upgrade",
        b"proxy-connection",
    }
)
REASONS = {
    200: "OK",
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


class Refused(Exception):
    """A request answered here, with its status and one line, and not handed on."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[bytes, bytes]]  # as sent, less the framing ones

    def path(self) -> str:
        return self.target.partition("?")[0]


def parse_head(head: bytes) -> tuple[Request, dict[bytes, bytes]]:
    """The request line and headers (up to the blank line); Refused for what is not HTTP/1.x.
    Returns the request and its framing headers (lower-cased names: content-length, transfer-encoding, expect)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[1]:
        raise Refused(400, "the request line is not METHOD TARGET HTTP/1.x")
    method, target, version = (part.decode("latin-1") for part in parts)
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise Refused(505, f"{version[:20]} is not served here: use HTTP/1.1")
    if method not in METHODS:
        raise Refused(400, f"unknown method {method[:20]}")
    kept: list[tuple[bytes, bytes]] = []
    framing: dict[bytes, bytes] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not TOKEN.match(name):
            raise Refused(400, "a header line is not NAME: VALUE")
        key, value = name.lower(), value.strip(b" \t")
        if key in (b"content-length", b"transfer-encoding") and key in framing and framing[key] != value:
            raise Refused(400, f"{name.decode('latin-1')} is given twice")
        if key in HOP_BY_HOP:
            framing[key] = value
        else:
            kept.append((name, value))
    return Request(method, target, version, kept), framing


def body_length(framing: dict[bytes, bytes], limit: int) -> int | None:
    """The declared length (0 when none); None for a chunked body; Refused for framing that is
    ambiguous or a declared body over `limit`."""
    coding = framing.get(b"transfer-encoding")
    declared = framing.get(b"content-length")
    if coding is not None:
        if declared is not None:
            raise Refused(400, "Content-Length and Transfer-Encoding together")
        if coding.lower() != b"chunked":
            raise Refused(501, "only Transfer-Encoding: chunked is served here")
        return None
    if declared is None:
        return 0
    if not declared.isdigit():
        raise Refused(400, "Content-Length is not a number")
    if len(declared) > 18 or int(declared) > limit:
        raise Refused(413, f"the body is larger than this server takes ({limit} bytes)")
    return int(declared)


async def idle(awaitable):
    try:
        return await asyncio.wait_for(awaitable, IDLE_SECONDS)
    except asyncio.TimeoutError:
        raise Refused(408, f"the client sent nothing for {IDLE_SECONDS:g} s") from None


async def read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        line = await idle(reader.readuntil(b"\r\n"))
        try:
            length = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise Refused(400, "a chunk's size is not a hexadecimal number") from None
        if length < 0 or size + length > limit:
            raise Refused(413, f"the body is larger than this server takes ({limit} bytes)")
        if length == 0:
            while (await idle(reader.readuntil(b"\r\n"))) != b"\r\n":  # trailers: read, not handed on
                pass
            return b"".join(chunks)
        chunks.append(await idle(reader.readexactly(length)))
        size += length
        if await idle(reader.readexactly(2)) != b"\r\n":
            raise Refused(400, "a chunk does not end with CRLF")


class Front:
    """The public port's server: reads requests whole, answers liveness, hands the rest to the worker."""

    def __init__(self, backend: str, max_body: int, recorder=None) -> None:
        self.backend, self.max_body, self.recorder = backend, max_body, recorder  # recorder: runner.serving.recording's
        self.booted = False  # the worker ran init() and accepts requests
        self.queue = asyncio.Semaphore(BACKEND_QUEUE)
        self.connections: set[asyncio.Task] = set()
        self.handed_on: set[asyncio.Task] = set()  # of those, the ones whose request is whole
        self.server: asyncio.Server | None = None

    async def start(self, listener: socket.socket) -> None:
        """Serve on `listener` (bound already)."""
        self.server = await asyncio.start_server(self.handle, sock=listener, limit=MAX_HEAD_BYTES, backlog=2048)

    async def drain(self, seconds: float) -> None:
        """Accept no more connections (the port is closed), drop those still sending their request,
        and wait up to `seconds` for the requests handed to the worker to be answered."""
        self.server.close()
        for task in self.connections - self.handed_on:
            task.cancel()
        if self.handed_on:
            await asyncio.wait(set(self.handed_on), timeout=seconds)

    async def close(self) -> None:
        self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.connections.add(task)
        try:
            try:
                first = True
                while await self.exchange(reader, writer, first):
                    first = False
                    self.handed_on.discard(task)
            except Refused as refused:
                await self.send(writer, answer(refused.status, str(refused)))
        except (Refused, asyncio.IncompleteReadError, OSError):
            pass  # the client left, or reads nothing of its answer
        finally:
            self.connections.discard(task)
            self.handed_on.discard(task)
            if writer.transport.get_write_buffer_size():  # an answer it does not read: dropped, not kept
                writer.transport.abort()
            else:
                writer.close()

    async def exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bool) -> bool:
        """One request and its answer; True when the connection is kept for the next one."""
        try:
            head = await asyncio.wait_for(
                reader.readuntil(b"\r\n\r\n"), HEADER_SECONDS if first else KEEP_ALIVE_SECONDS
            )
        except asyncio.TimeoutError:
            if not first:
                return False  # a kept connection without a next request: closed quietly
            raise Refused(408, f"the request's headers did not arrive within {HEADER_SECONDS:g} s") from None
        except asyncio.LimitOverrunError:
            raise Refused(431, f"the request's headers are larger than {MAX_HEAD_BYTES} bytes") from None
        request, framing = parse_head(head[:-4])
        length = body_length(framing, self.max_body)
        keep = request.version == "HTTP/1.1" and framing.get(b"connection", b"").lower() != b"close"
        if request.path() == "/" and request.method in ("GET", "HEAD") and self.booted and length == 0:
            await self.send(writer, liveness(request.method, keep))
            return keep
        if framing.get(b"expect", b"").lower() == b"100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await read_chunked(reader, self.max_body) if length is None else await idle(reader.readexactly(length))
        self.handed_on.add(asyncio.current_task())
        started = time.perf_counter()
        answered = await self.forward(request, body)
        if self.recorder is not None and request.method == "POST" and request.path() == "/score":
            self.recorder.record(Route.SCORE, body, *http_answer(answered), time.perf_counter() - started)
        kept = kept_alive(answered) if keep and request.method != "HEAD" else None
        await self.send(writer, kept or answered)
        return kept is not None

    async def forward(self, request: Request, body: bytes) -> bytes:
        """The worker's whole answer to `request`; 503 when the worker is not there (stopping)."""
        head = [f"{request.method} {request.target} {request.version}".encode("latin-1")]
        head += [name + b": " + value for name, value in request.headers]
        head += [b"Content-Length: " + str(len(body)).encode(), b"Connection: close"]
        async with self.queue:
            answered = await self.exchange_with_worker(b"\r\n".join(head) + b"\r\n\r\n" + body)
        if answered is None:
            return answer(503, "the scoring script's worker is not accepting requests (the server is stopping)")
        if not answered:
            return answer(
                502,
                "the scoring script's worker closed the connection without an answer (it ended, or the server is"
                " stopping)",
            )
        self.booted = True  # the worker accepts only once init() is done: liveness is answered here from now on
        return answered

    async def exchange_with_worker(self, request: bytes) -> bytes | None:
        """The worker's answer, read to end-of-file (the sync worker closes after each); None when
        it cannot be reached. The request is followed by end-of-file: the worker, lingering for
        the peer's close after its answer (gunicorn's close_graceful), is never kept waiting on this loop."""
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as worker:
            worker.setblocking(False)
            try:
                await loop.sock_connect(worker, self.backend)
            except OSError:
                return None
            chunks = []
            try:
                await loop.sock_sendall(worker, request)
                worker.shutdown(socket.SHUT_WR)
                while chunk := await loop.sock_recv(worker, READ_BYTES):
                    chunks.append(chunk)
            except OSError:
                pass
            return b"".join(chunks)

    async def send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await idle(writer.drain())


def answer(status: int, message: str) -> bytes:
    """An answer of this layer's own, worded as azmlinfsrv words its errors ({"message": ...})."""
    body = json.dumps({"message": message}).encode()
    return (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def liveness(method: str, keep: bool) -> bytes:
    """azmlinfsrv's own answer to GET / ("Healthy")."""
    body = b"Healthy"
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    return head.encode() + (body if method == "GET" else b"")


def kept_alive(answer: bytes) -> bytes | None:
    """The worker's answer (Connection: close: the sync worker serves one request a connection)
    with the connection kept open for the client's next request; None when its body is not
    delimited by a Content-Length that it fills (then only the close ends it)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 ") or lines[0][9:12] in (b"100", b"101"):
        return None
    fields = [(line.partition(b":")[0].strip().lower(), line.partition(b":")[2].strip()) for line in lines[1:]]
    lengths = [value for name, value in fields if name == b"content-length"]
    if (
        any(name == b"transfer-encoding" for name, _ in fields)
        or len(lengths) != 1
        or lengths[0] != str(len(body)).encode()
    ):
        return None
    kept = [line for line, (name, _) in zip(lines[1:], fields) if name != b"connection"]
    return b"\r\n".join([lines[0], *kept, b"Connection: keep-alive"]) + b"\r\n\r\n" + body
