"""inputs.NAME.source as a list of https files: refused at validate, in one line naming the
field and the entry, whenever one directory could not hold them all as they are named."""

from __future__ import annotations

import json

import pytest
from hostile import assert_clean, assert_refused, nothing_written_outside

from runner.errors import ManifestError

CASES = [
    (
        "same_file_name",
        ["https://h/a/x.bin", "https://h/b/x.bin"],
        "[1]: 'https://h/b/x.bin': file name 'x.bin' is also that of [0]",
    ),
    (
        "s3_in_a_list",
        ["https://h/a.bin", "s3://bucket/prefix"],
        "[1]: 's3://bucket/prefix': a list holds https:// files",
    ),
    ("local_path_in_a_list", ["data/a.bin"], "[0]: 'data/a.bin': a list holds https:// files"),
    ("no_file_in_path", ["https://h/"], "[0]: 'https://h/': its path names no file"),
    ("dot_dot", ["https://h/a/.."], "its path names no file"),
    ("control_character", ["https://h/a\u0001b"], "its path names no file"),
    ("empty_list", [], "needs at least one https:// URL"),
    ("not_text", [1, 2], "must be a path or URL, or a list of https:// URLs"),
    ("mapping", {"url": "https://h/a"}, "must be a path or URL, or a list of https:// URLs"),
    ("no_host", ["https:///a.bin"], "a list holds https:// files"),
    ("long_name", ["https://h/" + "a" * 256], "[0]: its file name is longer than 255 bytes"),
    ("too_many", [f"https://h/{i}.bin" for i in range(1001)], "1001 sources: at most 1000"),
]


def write(tmp_path, source) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    text = "name: demo\nentry_script: train.py\ninputs:\n  data:\n    source: " + json.dumps(source) + "\n"
    (tmp_path / "tftrain.yml").write_text(text)


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_a_list_one_directory_cannot_hold_is_refused_at_validate(cli, tmp_path, case):
    _name, source, says = case
    write(tmp_path, source)
    with nothing_written_outside(tmp_path):
        result = cli("validate", "-f", str(tmp_path / "tftrain.yml"), cwd=tmp_path)
    assert_refused(result, ManifestError, "tftrain.yml:5: inputs.data.source", says)


def test_one_source_and_a_list_of_https_files_both_validate(cli, tmp_path):
    for source in ("https://h/a.bin", ["https://h/a.bin", "http://h/b/c.bin?v=1", "https://h/d%20e.bin"]):
        write(tmp_path, source)
        assert_clean(cli("validate", "-f", str(tmp_path / "tftrain.yml"), cwd=tmp_path))
