"""Per-example evidence read as hostile input: each format, every refusal one EvidenceError line
naming the file and row, and two sides lined up on their common ids."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest

from runner.errors import EvidenceError
from runner.verdict import evidence as module
from runner.verdict.evidence import line_up, read_evidence


def jsonl(tmp_path, rows, name="eval.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_three_formats_read_alike(tmp_path):
    rows = [{"id": "a", "correct": 1}, {"id": "b", "correct": 0}, {"id": 3, "correct": True}]
    from_json = read_evidence(jsonl(tmp_path, rows), "correct")
    (tmp_path / "eval.csv").write_text("id,correct,loss\na,1,0.1\nb,0,2.5\n3,1,0.2\n")
    from_csv = read_evidence(tmp_path / "eval.csv", "correct")
    np.savez(tmp_path / "eval.npz", id=np.array(["a", "b", "3"]), correct=np.array([1, 0, 1]))
    from_npz = read_evidence(tmp_path / "eval.npz", "correct")
    for evidence in (from_json, from_csv, from_npz):
        assert evidence.ids == ("a", "b", "3") and evidence.values.tolist() == [1.0, 0.0, 1.0]
    assert from_json.fingerprint == from_csv.fingerprint == from_npz.fingerprint


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"   \n\n", "empty"),
        (b'{"id": "a", "correct": 1}\nnot json\n', "eval.jsonl:2: not a JSON object"),
        (b"[1, 2]\n", "eval.jsonl:1: not a JSON object with an id"),
        (b'{"correct": 1}\n', "eval.jsonl:1: no id"),
        (b'{"id": "a"}\n', "eval.jsonl:1: no correct (evaluation.metric)"),
        (b'{"id": "a", "correct": "yes"}\n', "eval.jsonl:1: correct is not a number ('yes')"),
        (b'{"id": "a", "correct": NaN}\n', "eval.jsonl:1: not a JSON object (NaN is not a number JSON allows)"),
        (b'{"id": "a", "correct": 1e999}\n', "eval.jsonl:1: correct is not a finite number"),
        (b'{"id": "a", "correct": [1]}\n', "eval.jsonl:1: correct is not a number (list)"),
        (b'{"id": "a", "correct": 1}\n{"id": "a", "correct": 0}\n', "id 'a' appears twice (row 2 repeats it)"),
        (b'{"id": {"x": 1}, "correct": 1}\n', "eval.jsonl:1: id is not a string or an integer"),
        (b'{"id": "a\\u0000b", "correct": 1}\n', "eval.jsonl:1: id is not a printable string"),
        (
            b'{"id": "a", "correct": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
            "eval.jsonl:1: not a JSON object (nested too deeply)",
        ),
        (b'{"id": "a", "correct": ' + b"9" * 5000 + b"}\n", "eval.jsonl:1: not a JSON object (Exceeds the limit"),
    ],
)
def test_bad_json_lines_are_one_line_naming_the_row(tmp_path, content, message):
    path = tmp_path / "eval.jsonl"
    path.write_bytes(content)
    with pytest.raises(EvidenceError) as caught:
        read_evidence(path, "correct")
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"id,loss\na,1\n", "eval.csv:2: no correct"),
        (b"id,correct\na,inf\n", "eval.csv:2: correct is not a finite number"),
        (b"id,correct\na,nan\n", "eval.csv:2: correct is not a finite number"),
        (b"id,correct\n", "eval.csv: no rows"),
        (b"id,correct\n\xff\xfe,1\n", "eval.csv: not UTF-8 text"),
        (b'id,correct\n"a,1\n', "eval.csv"),
    ],
)
def test_bad_csv_is_one_line(tmp_path, content, message):
    path = tmp_path / "eval.csv"
    path.write_bytes(content)
    with pytest.raises(EvidenceError, match=message.replace("(", r"\(")):
        read_evidence(path, "correct")


def test_bad_npz_is_one_line(tmp_path):
    path = tmp_path / "eval.npz"
    cases = [
        (dict(id=np.array(["a"]), loss=np.array([1.0])), "no 'correct' array"),
        (dict(correct=np.array([1.0])), "no 'id' array"),
        (dict(id=np.array(["a", "b"]), correct=np.array([1.0])), "one-dimensional arrays of one length"),
        (dict(id=np.array(["a"]), correct=np.array(["x"])), "correct is not numeric"),
        (dict(id=np.array(["a", "b"]), correct=np.array([1.0, np.nan])), "row 2: correct is not a finite number"),
        (dict(id=np.array(["a", "a"]), correct=np.array([1.0, 0.0])), "appears twice"),
        (dict(id=np.array([{"x": 1}], dtype=object), correct=np.array([1.0])), "not an npz archive of plain arrays"),
    ]
    for arrays, message in cases:
        np.savez(path, **arrays)
        with pytest.raises(EvidenceError, match=message):
            read_evidence(path, "correct")
    path.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(EvidenceError, match="not an npz archive"):
        read_evidence(path, "correct")


def test_an_npz_that_unpacks_past_the_limit_is_refused_before_it_is_unpacked(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "MAX_BYTES", 1 << 20)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("id.npy", b"\0" * (8 << 20))  # 8 MB of zeros pack into a few KB
        archive.writestr("correct.npy", b"\0")
    (tmp_path / "eval.npz").write_bytes(buffer.getvalue())
    with pytest.raises(EvidenceError, match="array 'id' unpacks to 8 MB, over the 1 MB evidence limit"):
        read_evidence(tmp_path / "eval.npz", "correct")


def test_links_fifos_missing_and_large_files_are_refused(tmp_path, monkeypatch):
    real = jsonl(tmp_path, [{"id": "a", "correct": 1}], "real.jsonl")
    (tmp_path / "link.jsonl").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.jsonl")
    for name, message in (
        ("link.jsonl", "a link"),
        ("fifo.jsonl", "not a regular file"),
        ("gone.jsonl", "not found"),
        ("x.txt", "not .jsonl, .csv, .npz"),
    ):
        with pytest.raises(EvidenceError, match=message):
            read_evidence(tmp_path / name, "correct")
    monkeypatch.setattr(module, "MAX_BYTES", 10)
    with pytest.raises(EvidenceError, match="over the 0 MB evidence limit"):
        read_evidence(real, "correct")
    monkeypatch.setattr(module, "MAX_BYTES", 1 << 20)
    monkeypatch.setattr(module, "MAX_ROWS", 2)
    with pytest.raises(EvidenceError, match="over 2 rows"):
        read_evidence(jsonl(tmp_path, [{"id": i, "correct": 1} for i in range(3)]), "correct")


def test_sides_line_up_on_common_ids_in_one_order(tmp_path):
    def seed(name, rows):
        return read_evidence(jsonl(tmp_path, [{"id": key, "correct": value} for key, value in rows], name), "correct")

    candidate = [seed("c0.jsonl", [("b", 1), ("a", 0), ("c", 1)]), seed("c1.jsonl", [("a", 1), ("b", 1), ("c", 0)])]
    baseline = [seed("b0.jsonl", [("c", 0), ("a", 1), ("b", 0), ("d", 1)])]
    paired = line_up(candidate, baseline)
    assert paired.ids == ("a", "b", "c") and not paired.same_set and paired.left_out == 1
    assert paired.candidate.tolist() == [[0, 1, 1], [1, 1, 0]] and paired.baseline.tolist() == [[1, 0, 0]]
    with pytest.raises(EvidenceError, match="share no example id"):
        line_up(candidate, [seed("other.jsonl", [("z", 1)])])
    with pytest.raises(EvidenceError, match="no per-example evidence on the baseline's side"):
        line_up(candidate, [])
