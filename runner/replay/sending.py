"""How a replay's requests reach the served versions: one keep-alive connection per worker and
side, and each request written to every side before any answer is read, so that the versions
answer it at the same instant under the same load. One thread does it all (a selector tells which
side answered first): a second thread per request cost more, on two cores, than the model did.
"""

from __future__ import annotations

import http.client
import json
import selectors
import threading
import time
from dataclasses import dataclass
from typing import Any

from runner.serving.launch import BackgroundServer, scoring_of
from runner.serving.records import Request, Route

MAX_ANSWER_BYTES = 64 << 20  # an answer read at most (a larger one is no answer)


@dataclass(frozen=True)
class Sent:
    status: int  # 0: no answer (refused, reset, timed out, past the deadline)
    body: Any  # the answer's JSON, its text when it is not JSON, None without an answer
    seconds: float


NO_ANSWER = Sent(0, None, 0.0)


class Side:
    """One served version and how requests reach it: its routes, its key, a connection per worker."""

    def __init__(self, server: BackgroundServer, token: str, timeout: float) -> None:
        self.server, self.token, self.timeout = server, token, timeout
        self.scoring = scoring_of(server.served) is not None
        self._local = threading.local()

    def path(self, request: Request) -> str:
        route = request.route or (Route.SCORE if self.scoring else Route.V1)
        return route.path(self.server.served.name)

    def send(self, method: str, path: str, body: bytes | None = None) -> Sent:
        """One request, its answer awaited."""
        return exchange([self], method, [path], body)[0]

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()

    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                "127.0.0.1", self.server.port.value, timeout=self.timeout
            )
        return connection

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        self._local.connection = None

    def _write(self, method: str, path: str, body: bytes | None) -> http.client.HTTPConnection | None:
        """The request written (on a new connection when the kept one is gone); None when it cannot be."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            **({"Content-Type": "application/json"} if body is not None else {}),
        }
        for _attempt in (0, 1):
            connection = self._connection()
            try:
                connection.request(method, path, body=body, headers=headers)
                return connection
            except (OSError, http.client.HTTPException):
                self._drop(connection)
        return None

    def _read(self, connection: http.client.HTTPConnection, started: float) -> Sent | None:
        """The answer; None when the connection broke before one came (the server closed a kept one)."""
        try:
            answer = connection.getresponse()
            data = answer.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException):
            self._drop(connection)
            return None
        seconds = time.perf_counter() - started
        if len(data) > MAX_ANSWER_BYTES:
            self._drop(connection)
            return Sent(0, None, seconds)
        return Sent(answer.status, _decoded(data), seconds)


def exchange(sides: list[Side], method: str, paths: list[str], body: bytes | None, reverse: bool = False) -> list[Sent]:
    """The same request to every side (to `paths[i]` on `sides[i]`), written to all before any answer
    is read; `reverse`: written last side first (alternated by the caller, so neither side is always
    first). Each Sent's seconds run from its own write to its own answer."""
    sent: list[Sent | None] = [None] * len(sides)
    started = [0.0] * len(sides)
    with selectors.DefaultSelector() as waiting:
        for index in reversed(range(len(sides))) if reverse else range(len(sides)):
            started[index] = time.perf_counter()
            connection = sides[index]._write(method, paths[index], body)
            if connection is None or connection.sock is None:
                sent[index] = Sent(0, None, time.perf_counter() - started[index])
            else:
                waiting.register(connection.sock, selectors.EVENT_READ, (index, connection))
        while waiting.get_map():
            left = min(sides[index].timeout - (time.perf_counter() - started[index]) for index, _ in _pending(waiting))
            ready = waiting.select(timeout=max(left, 0.0))
            if not ready:  # the time limit: every side still silent gets no answer
                for index, connection in _pending(waiting):
                    waiting.unregister(connection.sock)
                    sides[index]._drop(connection)
                    sent[index] = Sent(0, None, time.perf_counter() - started[index])
                break
            for key, _events in ready:
                index, connection = key.data
                waiting.unregister(key.fileobj)
                sent[index] = sides[index]._read(connection, started[index]) or _again(
                    sides[index], method, paths[index], body, started[index]
                )
    return [answer if answer is not None else NO_ANSWER for answer in sent]


def _pending(waiting: selectors.BaseSelector) -> list[tuple[int, http.client.HTTPConnection]]:
    return [key.data for key in waiting.get_map().values()]


def _again(side: Side, method: str, path: str, body: bytes | None, started: float) -> Sent:
    """A kept connection the server had closed: once more on a new one, within the time left."""
    if time.perf_counter() - started < side.timeout:
        connection = side._write(method, path, body)
        if connection is not None:
            answer = side._read(connection, started)
            if answer is not None:
                return answer
    return Sent(0, None, time.perf_counter() - started)


def _decoded(data: bytes) -> Any:
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
