"""The recorder: every answered request once, sampled, rotated, never more than the cap on disk,
never outside its directory, and a full disk stops it with one line, never a request."""

from __future__ import annotations

import errno
import json
import os

import pytest

from runner.serving import recording
from runner.serving.recording import Recorder, http_answer, open_directory
from runner.serving.records import Route, read_requests


def recorder(tmp_path, said, sample=1.0, max_bytes=1 << 20):
    return Recorder(tmp_path / "rec", sample, max_bytes, said.append)


def body(i: int) -> bytes:
    return json.dumps({"instances": [[i, i + 0.5]]}).encode()


def test_answered_requests_become_a_request_file_the_replay_reads(tmp_path):
    said = []
    rec = recorder(tmp_path, said)
    for i in range(5):
        rec.record(Route.V1, body(i), 200, b'{"predictions": [[0.1, 0.9]]}', 0.0042)
    rec.record(Route.V1, body(9), 400, b'{"error": "bad"}', 0.001)  # refused: not recorded
    rec.record(Route.V2, b"\x00binary", 200, b"{}", 0.001)  # not JSON: skipped, counted
    rec.close()
    requests = read_requests(tmp_path / "rec")
    assert [r.body for r in requests] == [json.loads(body(i)) for i in range(5)]
    assert (
        requests[0].route is Route.V1
        and requests[0].recorded["latency_ms"] == 4.2
        and requests[0].recorded["status"] == 200
    )
    assert rec.skipped == 1 and said == [
        f"tftrain-serve: recorded 5 requests in {tmp_path / 'rec'}; 1 not kept (not JSON, or a line too large to"
        " replay)"
    ]
    assert {oct(f.stat().st_mode & 0o777) for f in (tmp_path / "rec").iterdir()} == {
        "0o600"
    }  # request bodies: the owner's only


def test_files_rotate_and_the_cap_is_never_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(recording, "MIN_FILE_BYTES", 1000)
    rec = recorder(tmp_path, [], max_bytes=4000)
    for i in range(200):
        rec.record(Route.V1, body(i), 200, b'{"predictions": [1]}', 0.001)
    rec.close()
    files = sorted((tmp_path / "rec").iterdir())
    assert len(files) > 1 and sum(f.stat().st_size for f in files) <= 4000
    kept = read_requests(tmp_path / "rec")
    assert kept[-1].body == json.loads(body(199)) and len(kept) < 200  # the newest kept, the oldest dropped


def test_a_sample_records_about_its_share(tmp_path):
    rec = recorder(tmp_path, [], sample=0.1)
    for i in range(2000):
        rec.record(Route.V1, body(i), 200, b"{}", 0.001)
    rec.close()
    assert 120 < len(read_requests(tmp_path / "rec")) < 290


def test_a_full_disk_stops_the_recording_with_one_line(tmp_path, monkeypatch):
    said = []
    rec = recorder(tmp_path, said)
    real = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(recording.os, "write", full)
    for i in range(100):
        rec.record(Route.V1, body(i), 200, b"{}", 0.001)  # never raises on the server's side
    rec.close()
    monkeypatch.setattr(recording.os, "write", real)
    assert len(said) == 2 and said[0].startswith("tftrain-serve: recording stopped: No space left on device")
    assert said[1] == f"tftrain-serve: recorded 0 requests in {tmp_path / 'rec'}"
    assert rec.stopped


def test_a_link_a_file_or_a_read_only_directory_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ValueError, match="a link"):
        open_directory(tmp_path / "link")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        open_directory(tmp_path / "file")
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(ValueError, match="not writable"):
            open_directory(tmp_path / "ro")
    with pytest.raises(ValueError, match="record-sample"):
        Recorder(tmp_path / "real", 0, 1 << 20, print)


def test_numbering_continues_after_the_files_already_there(tmp_path):
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "requests-000007.jsonl").write_text('{"id": "old", "body": 1}\n')
    rec = recorder(tmp_path, [])
    rec.record(Route.V1, body(1), 200, b"{}", 0.001)
    rec.close()
    assert sorted(p.name for p in (tmp_path / "rec").iterdir()) == ["requests-000007.jsonl", "requests-000008.jsonl"]


def test_an_http_answer_is_read_only_when_whole():
    assert http_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}") == (200, b"{}")
    assert http_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}") == (0, b"")
    assert http_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}") == (0, b"")
    assert http_answer(b"garbage") == (0, b"")


def test_a_recording_never_holds_a_line_or_more_requests_than_a_replay_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(recording, "LINES_PER_FILE", 10)
    rec = recorder(tmp_path, [])
    for i in range(100):
        rec.record(Route.V1, body(i), 200, b"{}", 0.001)
    huge = b'{"instances": [["' + b"x" * (9 << 20) + b'"]]}'
    rec.record(Route.V1, huge, 200, b"{}", 0.001)  # over the reader's line limit: skipped
    rec.close()
    kept = read_requests(tmp_path / "rec")
    assert len(kept) <= 40 and kept[-1].body == json.loads(body(99)) and rec.skipped == 1
