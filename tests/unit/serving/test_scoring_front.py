"""The scoring server's front (runner.serving.scoring.front), in-process against a stand-in for
gunicorn's sync worker (a Unix socket that serves one connection at a time and records what it got):
silent and slow clients cost the worker nothing, liveness is answered without it once it has
booted, framing is checked and normalised before it is handed on."""

from __future__ import annotations

import asyncio
import socket

import pytest

from runner.serving.scoring import front
from runner.serving.scoring.front import Refused, body_length, parse_head


@pytest.mark.parametrize(
    "head, status",
    [
        (b"GET /", 400),
        (b"GET / HTTP/2.0", 505),
        (b"BREW / HTTP/1.1", 400),
        (b"GET / HTTP/1.1\r\nno colon here", 400),
        (b"GET / HTTP/1.1\r\n bad: fold", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400),
    ],
)
def test_a_head_that_is_not_http_1_is_refused(head, status):
    with pytest.raises(Refused) as refused:
        parse_head(head)
    assert refused.value.status == status


@pytest.mark.parametrize(
    "framing, status",
    [
        ({b"content-length": b"3", b"transfer-encoding": b"chunked"}, 400),
        ({b"transfer-encoding": b"gzip"}, 501),
        ({b"content-length": b"-1"}, 400),
        ({b"content-length": b"101"}, 413),
        ({b"content-length": b"9" * 19}, 413),
    ],
)
def test_framing_that_is_ambiguous_or_too_large_is_refused(framing, status):
    with pytest.raises(Refused) as refused:
        body_length(framing, 100)
    assert refused.value.status == status


def test_framing_headers_are_kept_apart():
    request, framing = parse_head(
        b"POST /score?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\nExpect:"
        b" 100-continue"
    )
    assert (request.method, request.path(), request.version) == ("POST", "/score", "HTTP/1.1")
    assert request.headers == [(b"Host", b"h"), (b"Authorization", b"Bearer k")]
    assert body_length(framing, 10) is None and framing[b"expect"] == b"100-continue"


class Worker:
    """gunicorn's sync worker, as the front sees it: one connection at a time, the whole request
    read by its Content-Length, an answer, close."""

    def __init__(self, path: str) -> None:
        self.path, self.requests = path, []

    async def start(self) -> None:
        self.lock = asyncio.Lock()
        self.server = await asyncio.start_unix_server(self.handle, self.path)

    async def handle(self, reader, writer) -> None:
        async with self.lock:  # one at a time, as one sync worker
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(
                next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            )
            body = await reader.readexactly(length)
            self.requests.append((head, body))
            answer = b"Healthy" if head.startswith(b"GET / ") else b"[1]"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(answer), answer)
            )
            await writer.drain()
            writer.close()


async def exchange(port: int, data: bytes) -> bytes:
    """One request on a connection of its own, the answer read to the close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    line, _, rest = data.partition(b"\r\n")
    writer.write(line + b"\r\nConnection: close\r\n" + rest)
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


def run_front(tmp_path, test, max_body: int = 1000):
    async def main():
        worker = Worker(str(tmp_path / "worker.sock"))
        await worker.start()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        serving = front.Front(worker.path, max_body)
        await serving.start(listener)
        try:
            return await test(listener.getsockname()[1], worker, serving)
        finally:
            await serving.close()
            worker.server.close()

    return asyncio.run(main())


def test_silent_and_slow_clients_do_not_hold_the_worker(tmp_path):
    async def test(port, worker, serving):
        held = []
        for number in range(50):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                [b"", b"POST /score HTTP/1.1\r\nHost:", b"POST /score HTTP/1.1\r\nContent-Length: 10\r\n\r\n{"][
                    number % 3
                ]
            )
            held.append(writer)
        answer = await exchange(port, b"POST /score HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
        for writer in held:
            writer.close()
        return answer, worker.requests

    answer, requests = run_front(tmp_path, test)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"[1]")
    assert len(requests) == 1  # only the whole request reached the worker


def test_liveness_is_answered_here_once_the_worker_has_booted(tmp_path):
    async def test(port, worker, serving):
        first = await exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        booted = serving.booted
        await worker.lock.acquire()  # the worker busy with a long run()
        second = await exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        return first, booted, second, len(worker.requests)

    first, booted, second, forwarded = run_front(tmp_path, test)
    assert first.endswith(b"Healthy") and booted
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"Healthy") and forwarded == 1


def test_a_chunked_body_reaches_the_worker_with_its_length_and_expect_is_answered_here(tmp_path):
    async def test(port, worker, serving):
        answer = await exchange(
            port,
            b"POST /score HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\n{}\r\n3;x=y\r\n[1]\r\n0\r\nTrailer: t\r\n\r\n",
        )
        return answer, worker.requests

    answer, ((head, body),) = run_front(tmp_path, test)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 ")
    assert body == b"{}[1]" and b"Content-Length: 5" in head and b"chunked" not in head and b"Expect" not in head


def test_a_chunked_body_over_the_limit_is_413_and_never_reaches_the_worker(tmp_path):
    async def test(port, worker, serving):
        return (
            await exchange(
                port,
                b"POST /score HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + (b"64\r\n" + b"x" * 100 + b"\r\n") * 2,
            ),
            worker.requests,
        )

    answer, requests = run_front(tmp_path, test, max_body=150)
    assert answer.startswith(b"HTTP/1.1 413 ") and requests == []


def test_a_client_too_slow_with_its_headers_is_408(tmp_path, monkeypatch):
    monkeypatch.setattr(front, "HEADER_SECONDS", 0.3)

    async def test(port, worker, serving):
        return await exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n"), worker.requests

    answer, requests = run_front(tmp_path, test)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.3 s" in answer and requests == []


def test_no_worker_is_a_503_not_a_hang(tmp_path):
    async def test(port, worker, serving):
        worker.server.close()
        await worker.server.wait_closed()
        (tmp_path / "worker.sock").unlink()
        return await exchange(port, b"POST /score HTTP/1.1\r\nContent-Length: 0\r\n\r\n")

    assert run_front(tmp_path, test).startswith(b"HTTP/1.1 503 ")


def test_a_drain_drops_requests_still_arriving_and_answers_those_handed_on(tmp_path):
    async def test(port, worker, serving):
        stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
        stalled_writer.write(b"POST /score HTTP/1.1\r\n")
        await worker.lock.acquire()  # the worker busy with a run()
        handed = asyncio.create_task(exchange(port, b"POST /score HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"))
        await asyncio.sleep(0.3)
        draining = asyncio.create_task(serving.drain(5))
        stalled = await asyncio.wait_for(stalled_reader.read(), 2)
        worker.lock.release()
        await draining
        return stalled, await handed

    stalled, handed = run_front(tmp_path, test)
    assert stalled == b"" and handed.startswith(b"HTTP/1.1 200 ") and handed.endswith(b"[1]")


def test_a_kept_connection_serves_the_next_request_and_is_closed_when_idle(tmp_path, monkeypatch):
    monkeypatch.setattr(front, "KEEP_ALIVE_SECONDS", 0.5)

    async def test(port, worker, serving):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        for _ in range(2):
            writer.write(b"POST /score HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            answers.append((head, await reader.readexactly(3)))
        closed = await asyncio.wait_for(reader.read(), 5)  # idle past KEEP_ALIVE_SECONDS: closed, nothing sent
        return answers, closed, len(worker.requests)

    answers, closed, forwarded = run_front(tmp_path, test)
    assert [body for _, body in answers] == [b"[1]", b"[1]"] and forwarded == 2
    assert all(b"Connection: keep-alive" in head and b"Connection: close" not in head for head, _ in answers)
    assert closed == b""


def test_an_answer_without_its_length_ends_the_connection():
    assert front.kept_alive(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody") is None
    assert front.kept_alive(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort") is None
    assert (
        front.kept_alive(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok"
    )
