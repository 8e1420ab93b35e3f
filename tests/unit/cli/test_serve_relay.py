"""How `tftrain serve` relays its model server's output (runner.cli.serve._pump), on a pipe: the
lines that arrive together are written together, the port line is read, a line cut by the end is
kept, and why the server stopped is its own error line."""

from __future__ import annotations

import os

from runner.cli import serve
from runner.serving import launch


class Logged:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def text(self, message: str) -> None:
        self.writes.append(message)


class Server:
    def __init__(self, output: bytes) -> None:
        read_end, write_end = os.pipe()
        os.write(write_end, output)
        os.close(write_end)
        self.stdout = os.fdopen(read_end, "rb")


def test_lines_that_come_together_are_relayed_in_one_write():
    lines = b"".join(b"2026-11-28 I [7] azmlinfsrv - POST /score 200 1.1ms 3\n" for _ in range(200))
    server, logged, tail, port = (
        Server(b"tftrain-serve: port 4242 on 127.0.0.1\n" + lines + b"cut off"),
        Logged(),
        [],
        launch.ListeningPort(0),
    )
    serve._pump(server, logged, tail, port)
    assert port.value == 4242 and port.known.is_set()
    assert len(logged.writes) <= 2  # not one per line
    relayed = "\n".join(logged.writes).splitlines()
    assert len(relayed) == 202 and relayed[0].startswith("tftrain-serve: port") and relayed[-1] == "cut off"
    assert tail[-1] == "cut off" and len(tail) == 20


def test_why_the_server_stopped_is_its_own_error_line_before_gunicorns():
    tail = [
        "tftrain-serve: error: scoring script score.py: its worker (pid 9) ended (exit 3) while serving",
        "[ERROR] Shutting down",
        "",
    ]
    assert launch.told(tail) == tail[0]
    assert launch.told(["last words", ""]) == "last words" and launch.told([]) == "no output"
