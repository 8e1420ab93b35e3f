"""TensorFlow Serving's warmup file, the parts without TensorFlow: which requests it can hold, and a
file that is not one refused (one line naming the file and record) before TensorFlow is imported.
What TensorFlow writes and reads: tests/integration/replay/test_warmup.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from runner.cli.replay_export import check_target
from runner.errors import DiskFullError, UsageError
from runner.replay.sources import load_requests
from runner.replay.warmup import MAX_RECORDS, check_expressible, read_warmup, select, write_warmup
from runner.serving.records import WARMUP_FILE, Request, RequestsError, Route, is_warmup, masked_crc32c, read_requests
from runner.serving.signature import Signature, TensorSpec

SIGNATURE = Signature("serving_default", (TensorSpec("x", "float32", (None, 2)),), ())


def frame(data: bytes) -> bytes:
    """One TFRecord, framed as TensorFlow's writer frames it."""
    length = len(data).to_bytes(8, "little")
    return length + masked_crc32c(length).to_bytes(4, "little") + data + masked_crc32c(data).to_bytes(4, "little")


def test_the_checksum_is_crc32c_masked_as_tfrecord_masks_it():
    masked = masked_crc32c(b"123456789")
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    assert ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF == 0xE3069283  # CRC-32C's check value


def test_rows_columns_and_v2_tensors_are_chosen_in_the_signature_dtype():
    requests = [
        Request("rows", {"instances": [[1, 2], [3, 4]]}, Route.V1),
        Request("columns", {"inputs": {"x": [[0.5, 1.5]]}}),  # no route: the SavedModel's own, :predict
        Request("v2", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [7, 8]}]}, Route.V2),
    ]
    selection = select(requests, SIGNATURE)
    assert [name for name, _ in selection.chosen] == ["rows", "columns", "v2"]
    for (_, values), expected in zip(selection.chosen, ([[1, 2], [3, 4]], [[0.5, 1.5]], [[7, 8]])):
        assert values["x"].dtype == np.float32 and values["x"].tolist() == expected
    assert (selection.unfit, selection.scoring, selection.over) == (0, 0, 0)


def test_what_does_not_fit_is_left_out_and_counted_in_one_line(tmp_path):
    requests = [
        Request("ok", {"instances": [[1, 2]]}, Route.V1),
        Request("wide", {"instances": [[1, 2, 3]]}, Route.V1),
        Request("text", {"instances": [["a", "b"]]}, Route.V1),
        Request("other", {"inputs": {"y": [[1, 2]]}}, Route.V1),
        Request(
            "v2-dtype", {"inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 2], "data": [1, 2]}]}, Route.V2
        ),
        Request("not-an-object", [1, 2], Route.V1),
        Request("script", {"data": [1, 2]}, Route.SCORE),
    ]
    selection = select(requests, SIGNATURE)
    assert [name for name, _ in selection.chosen] == ["ok"]
    assert (selection.unfit, selection.scoring) == (5, 1)
    summary = selection.summary(tmp_path / "w")
    assert (
        "\n" not in summary
        and "1 requests written" in summary
        and "5 do not fit the signature (first: wide:" in summary
    )
    assert "1 are /score requests" in summary


def test_only_the_first_thousand_that_fit_are_kept():
    requests = [Request(f"r{i}", {"instances": [[i, i]]}, Route.V1) for i in range(MAX_RECORDS + 2)]
    selection = select([Request("bad", {"instances": [[1]]}, Route.V1), *requests], SIGNATURE)
    assert len(selection.chosen) == MAX_RECORDS and selection.chosen[-1][0] == f"r{MAX_RECORDS - 1}"
    assert (selection.over, selection.unfit) == (2, 1)


def test_no_request_that_fits_is_an_error_and_nothing_is_written(tmp_path):
    with pytest.raises(RequestsError, match="no request fits signature 'serving_default': left out: 1 do not fit"):
        write_warmup([Request("wide", {"instances": [[1, 2, 3]]}, Route.V1)], tmp_path / "w", SIGNATURE, "m")
    with pytest.raises(RequestsError, match="1 are /score requests"):
        write_warmup([Request("s", {"data": 1}, Route.SCORE)], tmp_path / "w", SIGNATURE, "m")
    assert not (tmp_path / "w").exists()


def test_a_signature_no_json_carries_is_refused():
    with pytest.raises(RequestsError, match="input 'c' is complex64: no JSON request carries it"):
        check_expressible(Signature("s", (TensorSpec("c", "complex64", (None,)),), ()))


def test_a_warmup_file_is_known_by_its_name_or_its_framing_a_request_file_is_not(tmp_path):
    lines = tmp_path / "requests.jsonl"
    lines.write_text('{"body": {"instances": [[1, 2]]}}\n')
    framed = tmp_path / "anything"
    framed.write_bytes(frame(b"data"))
    named = tmp_path / WARMUP_FILE
    named.write_text("not even TFRecords")
    assert (is_warmup(lines), is_warmup(framed), is_warmup(named)) == (False, True, True)
    assert is_warmup(tmp_path / "missing") is False
    assert load_requests(lines)[0].body == {
        "instances": [[1, 2]]
    }  # no TensorFlow imported on the way (tests/purity.py)
    with pytest.raises(
        RequestsError, match="a TensorFlow Serving warmup file .*: read with runner.replay.sources.load_requests"
    ):
        read_requests(framed)  # the JSON Lines reader never reads TFRecords as lines


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"no requests in it \(an empty warmup file\)"),
        (
            b'{"body": {"instances": [[1, 2]]}}\n',
            "record 1: not a TFRecord .*: a warmup file is TFRecords of PredictionLog",
        ),
        (b"\x00" * 5, r"record 1: truncated \(the file ends inside its header\)"),
        (frame(b"0123456789")[:-6], r"record 1: truncated \(it says 10 bytes, the file ends before\)"),
        (frame(b"one") + frame(b"two")[:14], "record 2: truncated"),
        (frame(b"one") + b"garbage after the record", "record 2: not a TFRecord"),
        (frame(b"") * (MAX_RECORDS + 1), f"record {MAX_RECORDS + 1}: more than {MAX_RECORDS} records"),
    ],
    ids=[
        "empty",
        "json-lines",
        "short-header",
        "truncated-data",
        "second-truncated",
        "trailing-garbage",
        "1001-records",
    ],
)
def test_a_file_that_is_not_a_warmup_file_is_refused_before_tensorflow(tmp_path, content, message):
    path = tmp_path / WARMUP_FILE
    path.write_bytes(content)
    with pytest.raises(RequestsError, match=message) as caught:
        load_requests(path)  # read_warmup, through the requests' one reader; TensorFlow never imported (purity)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_a_length_larger_than_the_file_is_never_read(tmp_path):
    length = (1 << 62).to_bytes(8, "little")  # a reader that trusted it would allocate it
    path = tmp_path / "huge-length"
    path.write_bytes(length + masked_crc32c(length).to_bytes(4, "little") + b"x" * 100)
    with pytest.raises(RequestsError, match=f"record 1: truncated \\(it says {1 << 62} bytes"):
        load_requests(path)


def test_a_1_gb_file_is_refused_unread_and_a_link_or_a_fifo_is_not_followed(tmp_path):
    big = tmp_path / WARMUP_FILE
    with open(big, "wb") as handle:
        handle.truncate(1 << 30)  # sparse: no gigabyte written
    with pytest.raises(RequestsError, match=f"{1 << 30} bytes: a warmup file read as requests holds at most 256 MiB"):
        read_warmup(big)
    link = tmp_path / "link"
    link.symlink_to(big)
    with pytest.raises(RequestsError, match="a link"):
        read_warmup(link)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RequestsError, match="not a regular file"):
        read_warmup(fifo)


def test_the_export_target_must_be_new_and_no_link(tmp_path):
    (tmp_path / "there").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name, message in (("there", "already there: give a new"), ("dangling", r"already there \(a link\)")):
        with pytest.raises(UsageError, match=message):
            check_target(tmp_path / name)
    with pytest.raises(UsageError, match="is not a directory"):
        check_target(tmp_path / "no-such-dir" / "w")
    check_target(tmp_path / "new")


def test_the_summary_names_the_first_unfit_request_by_id_never_its_body(tmp_path):
    secret = "s3cr3t-value"
    selection = select([Request("r-1", {"instances": [[secret, 1]]}, Route.V1)], SIGNATURE)
    assert "r-1:" in selection.summary(tmp_path / "w")
    # the server's own message may quote a value, cut at 20 chars
    assert json.dumps(selection.first_unfit).count(secret) <= 1


@pytest.mark.parametrize(
    "error, kind, words",
    [
        (OSError(28, "No space left on device", "w"), DiskFullError, "disk full writing"),
        (OSError(2, "No such file or directory", "w"), UsageError, "cannot be written (No such file or directory)"),
    ],
)
def test_a_warmup_file_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, error, kind, words):
    from runner.cli import replay_export
    from runner.replay import warmup

    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"body": {"instances": [[1.0, 2.0]]}}\n')

    def refused(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(warmup, "tensorflow_modules", lambda: None)
    monkeypatch.setattr(warmup, "write_warmup", refused)
    monkeypatch.setattr(replay_export, "model_signature", lambda ref, logger: (SIGNATURE, "m"))
    with pytest.raises(kind) as caught:
        replay_export.run(requests, tmp_path / "w", "m@v1", logger=None)
    assert words in str(caught.value) and str(tmp_path / "w") in str(caught.value)
