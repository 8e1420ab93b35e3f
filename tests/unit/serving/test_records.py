"""The request file: what is read, what is refused (one line naming the file and line)."""

from __future__ import annotations

import json
import os

import pytest

from runner.serving import records
from runner.serving.records import Request, RequestsError, Route, read_requests, write_requests


def write(path, *lines: str | bytes):
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


def test_lines_become_requests_with_ids_routes_and_what_was_recorded(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        '{"body": {"instances": [[1]]}}',
        "",
        '{"id": "b", "route": "v2", "body": {"inputs": []}, "status": 200, "x": 1}',
    )
    first, second = read_requests(path)
    assert (first.id, first.route, first.body) == ("line-1", None, {"instances": [[1]]})
    assert (second.id, second.route, second.recorded) == ("b", Route.V2, {"status": 200})


def test_written_requests_read_back_the_same(tmp_path):
    requests = [
        Request("a", {"instances": [[0.5]]}, Route.V1, {"latency_ms": 2.5}),
        Request("b", "raw text", Route.SCORE),
    ]
    assert write_requests(tmp_path / "out.jsonl", requests) == 2
    assert read_requests(tmp_path / "out.jsonl") == requests
    with pytest.raises(FileExistsError):
        write_requests(tmp_path / "out.jsonl", requests)


def test_a_recording_directory_is_read_in_file_order_and_other_files_left_alone(tmp_path):
    write(tmp_path / "requests-000002.jsonl", '{"id": "late", "body": 2}')
    write(tmp_path / "requests-000001.jsonl", '{"id": "early", "body": 1}')
    write(tmp_path / "notes.txt", "not a request")
    assert [r.id for r in read_requests(tmp_path)] == ["early", "late"]


@pytest.mark.parametrize(
    "lines, words",
    [
        ((), "no requests in it"),
        (("not json",), "r.jsonl:1: not JSON"),
        (("[1, 2]",), 'r.jsonl:1: a request is a JSON object with a "body"'),
        (('{"id": "x"}',), 'a JSON object with a "body"'),
        (('{"body": 1, "route": "grpc"}',), "route 'grpc' is none of v1, v2, score"),
        (('{"body": 1, "id": "a b"}',), "r.jsonl:1: id must be"),
        (('{"body": 1, "id": 7}',), "id must be"),
        (('{"body": 1, "id": "a"}', '{"body": 2, "id": "a"}'), "r.jsonl:2: id 'a' is used twice"),
        (('{"body": NaN}',), "r.jsonl:1: holds NaN or Infinity"),
        (('{"body": [1e400]}',), "r.jsonl:1: holds NaN or Infinity"),
        ((b'{"body": "\xff"}',), "not UTF-8"),
        (("[" * 100_000,), "r.jsonl:1:"),
    ],
)
def test_bad_lines_are_one_line_naming_file_and_line(tmp_path, lines, words):
    path = write(tmp_path / "r.jsonl", *lines)
    with pytest.raises(RequestsError) as caught:
        read_requests(path)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    assert str(caught.value).count("r.jsonl") <= 1  # the place said once


def test_too_many_requests_too_long_a_line_or_too_large_a_file_are_refused_before_reading_on(tmp_path, monkeypatch):
    path = write(tmp_path / "r.jsonl", *['{"body": 1}'] * 5)
    with pytest.raises(RequestsError, match="more than 3 requests"):
        read_requests(path, limit=3)
    monkeypatch.setattr(records, "MAX_LINE_BYTES", 16)
    write(tmp_path / "long.jsonl", '{"body": "' + "x" * 40 + '"}')
    with pytest.raises(RequestsError, match="long.jsonl:1: a line over"):
        read_requests(tmp_path / "long.jsonl")
    monkeypatch.setattr(records, "MAX_FILE_BYTES", 1000)
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as out:
        out.truncate(1 << 30)  # a sparse 1 GB file: refused on its size, never read
    with pytest.raises(RequestsError, match="1073741824 bytes"):
        read_requests(big)


def test_links_fifos_and_missing_files_are_refused(tmp_path):
    target = write(tmp_path / "real.jsonl", '{"body": 1}')
    (tmp_path / "link.jsonl").symlink_to(target)
    with pytest.raises(RequestsError, match="a link"):
        read_requests(tmp_path / "link.jsonl")
    with pytest.raises(RequestsError, match="no such file"):
        read_requests(tmp_path / "missing.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(RequestsError, match="fifo.jsonl"):
        read_requests(tmp_path / "fifo.jsonl")


def test_route_paths_name_the_served_model():
    assert Route.V1.path("m") == "/v1/models/m:predict"
    assert Route.of_path("/v2/models/m/infer", "m") is Route.V2
    assert Route.of_path("/v1/models/m/metadata", "m") is None
    assert json.loads(Request("a", {"x": [1.5]}).encoded()) == {"x": [1.5]}


def test_a_link_in_a_recording_directory_is_refused_not_followed(tmp_path):
    outside = write(tmp_path / "outside.jsonl", '{"id": "secret", "body": 1}')
    recording = tmp_path / "recorded"
    recording.mkdir()
    write(recording / "requests-000001.jsonl", '{"id": "mine", "body": 1}')
    (recording / "requests-000002.jsonl").symlink_to(outside)
    with pytest.raises(RequestsError, match=r"requests-000002.jsonl: a link"):
        read_requests(recording)
