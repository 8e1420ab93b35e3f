"""What the tests' protocol-speaking servers (GitHub, Kubernetes) share: a threaded HTTP server
on a free port of 127.0.0.1, started and stopped with the test."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
