"""A pass-through HTTP proxy in front of a real test server (moto's S3, a registry) that answers
chosen requests with an error instead, as a failing service would: the rest of the protocol stays
the real server's."""

from __future__ import annotations

import http.client
from fnmatch import fnmatchcase
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from protocol_server import LocalServer

S3_ERROR = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'


class FaultyProxy(LocalServer):
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.failing: dict[tuple[str, str], tuple[int, str, str]] = {}
        self.failed: list[tuple[str, str]] = []
        super().__init__(self._handler())

    def fail(self, method: str, path: str, status: int, body: str = "", content_type: str = "application/xml") -> None:
        """Answer `method path` (a glob) with `status` and `body` from now on."""
        self.failing[(method, path)] = (status, body, content_type)

    def fail_s3(self, method: str, path: str, status: int, code: str) -> None:
        """Answer as S3 does: an XML <Error> with the code (InternalError, SlowDown, …)."""
        self.fail(method, path, status, S3_ERROR.format(code=code, message=HTTPStatus(status).phrase))

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = urlsplit(self.path).path
                answer = next(
                    (a for (m, glob), a in proxy.failing.items() if m == self.command and fnmatchcase(path, glob)), None
                )
                if answer is not None:
                    proxy.failed.append((self.command, path))
                    status, text, content_type = answer
                    return self._send(status, [("Content-Type", content_type)], text.encode())
                connection = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    headers = {
                        k: v for k, v in self.headers.items() if k.lower() not in ("connection", "transfer-encoding")
                    }
                    connection.request(
                        self.command,
                        self.path,
                        body=body if body or "Content-Length" in self.headers else None,
                        headers=headers,
                    )
                    response = connection.getresponse()
                    data = response.read()
                    kept = [
                        (k, v)
                        for k, v in response.getheaders()
                        if k.lower() not in ("connection", "transfer-encoding", "content-length")
                    ]
                    self._send(
                        response.status,
                        kept,
                        data,
                        head=self.command == "HEAD",
                        length=response.getheader("Content-Length"),
                    )
                finally:
                    connection.close()

            def _send(
                self, status: int, headers: list, data: bytes, head: bool = False, length: str | None = None
            ) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", length if head and length is not None else str(len(data)))
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _relay

        return Handler
