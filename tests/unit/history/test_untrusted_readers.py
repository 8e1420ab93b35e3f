"""Records another party can write, read through runner/history/untrusted.py by every reader: a
report (the PR comment, the model card, a served version's layout) does without a bad one, saying
why; publishing refuses it in one line."""

from __future__ import annotations

import json
import os

import pytest

from runner.history.untrusted import optional_mapping
from runner.serving.layout import VersionDir
from runner.serving.scoring.script import recorded

HOSTILE = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "nan": '{"a": NaN}',
    "huge": '{"a": ' + "9" * 5000 + "}",
    "surrogate": '{"a": "\\ud800"}',
    "not-json": "{",
    "list": "[1, 2]",
    "not-utf8": b'{"a": "\xff"}',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_optional_record_is_left_out_with_one_line(tmp_path, case):
    path = tmp_path / "record.json"
    content = HOSTILE[case]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    said = []
    assert optional_mapping(path, said.append) == {}
    assert len(said) == 1 and said[0].startswith(f"{path} left out: ") and "\n" not in said[0]


def test_missing_links_and_fifos_are_no_record(tmp_path):
    said = []
    assert optional_mapping(tmp_path / "gone.json", said.append) == {} and said == []
    (tmp_path / "real.json").write_text('{"a": 1}')
    assert optional_mapping(tmp_path / "real.json") == {"a": 1}
    os.mkfifo(tmp_path / "fifo.json")
    assert optional_mapping(tmp_path / "fifo.json", said.append) == {} and len(said) == 1  # never blocks on it


@pytest.mark.parametrize("case", ["deep", "nan", "huge", "list"])
def test_a_served_versions_serving_json_that_is_hostile_reads_as_none(tmp_path, case):
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "serving.json").write_text(HOSTILE[case])
    assert recorded(tmp_path) is None
    assert VersionDir(tmp_path).serving() is None
    (tmp_path / "serving" / "serving.json").write_text(json.dumps({"format": "saved_model"}))
    assert VersionDir(tmp_path).serving() == {"format": "saved_model"}
