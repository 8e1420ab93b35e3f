"""The replay's sending (runner.replay.sending) against real HTTP servers on loopback."""

import http.server
import json
import threading
import time
from types import SimpleNamespace

import pytest

from runner.replay import sending
from runner.replay.sending import Side, exchange


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the model server
    delay = 0.0
    answer = b'{"predictions": [[1.0]]}'
    seen: list

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, self.headers["Authorization"], body))
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve(tmp_path):
    started = []

    def serve(delay=0.0, answer=None, handler=Handler):
        kind = type("H", (handler,), {"delay": delay, "seen": [], **({"answer": answer} if answer else {})})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), kind)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        served = SimpleNamespace(name="m", label=f"m@{len(started)}", directory=SimpleNamespace(root=tmp_path))
        background = SimpleNamespace(served=served, port=SimpleNamespace(value=server.server_address[1]))
        return Side(background, "key", timeout=2.0), kind

    yield serve
    for server in started:
        server.shutdown()
        server.server_close()


def test_each_side_is_timed_from_its_own_write_to_its_own_answer(serve):
    (slow, _), (fast, _) = serve(delay=0.4), serve()
    for reverse in (False, True):
        answers = exchange([slow, fast], "POST", ["/a", "/b"], b"{}", reverse=reverse)
        assert [sent.status for sent in answers] == [200, 200]
        assert answers[0].seconds >= 0.4 and answers[1].seconds < 0.2  # the slow side never delays the fast one
        assert answers[1].body == {"predictions": [[1.0]]}


def test_every_side_gets_the_request_with_its_own_path_and_key(serve):
    (one, first), (two, second) = serve(), serve()
    exchange([one, two], "POST", ["/v1/models/a:predict", "/score"], b'{"x": 1}')
    assert first.seen == [("/v1/models/a:predict", "Bearer key", b'{"x": 1}')]
    assert second.seen == [("/score", "Bearer key", b'{"x": 1}')]


def test_a_silent_side_is_no_answer_at_its_time_limit_and_the_other_is_kept(serve):
    (silent, _), (fast, _) = serve(delay=5.0), serve()
    silent.timeout = 0.5
    begun = time.perf_counter()
    answers = exchange([silent, fast], "POST", ["/", "/"], b"{}")
    assert answers[0].status == 0 and answers[0].body is None and answers[1].status == 200
    assert time.perf_counter() - begun < 2.0


def test_a_kept_connection_the_server_closed_is_sent_again_once(serve):
    class Closing(Handler):
        def do_POST(self):  # noqa: N802
            Handler.do_POST(self)
            time.sleep(0.3)  # the next request is written meanwhile, and never read:
            self.close_connection = True  # the kept connection closes under it

    (side, kind) = serve(handler=Closing)
    assert [side.send("POST", "/", b"{}").status for _ in range(3)] == [200, 200, 200]
    assert len(kind.seen) == 3


def test_an_answer_past_the_limit_is_no_answer(serve, monkeypatch):
    monkeypatch.setattr(sending, "MAX_ANSWER_BYTES", 10)
    (side, _) = serve(answer=json.dumps({"predictions": list(range(100))}).encode())
    assert side.send("POST", "/", b"{}").status == 0


def test_a_refused_side_is_no_answer_at_once(serve):
    (side, _) = serve()
    side.server.port.value = 1  # nothing listens there
    assert side.send("POST", "/", b"{}").status == 0
