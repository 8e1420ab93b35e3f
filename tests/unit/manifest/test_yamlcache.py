"""A YAML file parsed before comes back from the cache exactly as parsed, without PyYAML; anything
that is not an entry of ours is parsed again, and a cache that cannot be written is no error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from runner.errors import ManifestError
from runner.manifest import yamlcache
from runner.manifest.loading import load_yaml
from runner.manifest.yamlfile import parse

MANIFEST = """\
name: demo  # a comment
base: &base {lr: 0.1, steps: 10}
first:
  <<: *base
  steps: 20
list: [1, 2.5, .inf, .nan, -0.0, true, null, "x", 2024-01-02]
big: 123456789012345678901234567890
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))


def write(tmp_path: Path, text: str, name: str = "tftrain.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def same(a, b) -> bool:
    """Equal, NaN included, with the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def test_a_file_read_again_is_the_document_first_parsed(tmp_path):
    path = write(tmp_path, MANIFEST)
    first = load_yaml(path)
    assert len(list(yamlcache.directory().glob("*.json"))) == 1
    again = yamlcache.cached(yamlcache.entry(path.read_bytes()), path)
    assert again is not None
    assert same(again.data, first.data) and again.lines == first.lines and again.empty is False
    assert again.where(("first", "steps")) == f"{path}:5"
    assert load_yaml(path).lines == first.lines


def test_the_entry_is_found_by_content_not_by_name(tmp_path):
    load_yaml(write(tmp_path, MANIFEST, "a.yml"))
    other = write(tmp_path, MANIFEST, "b.yml")
    document = yamlcache.cached(yamlcache.entry(other.read_bytes()), other)
    assert document is not None and document.path == other  # errors name the file read now
    assert yamlcache.cached(yamlcache.entry(other.read_bytes() + b"\n# changed\n"), other) is None


def test_an_empty_file_is_kept_as_empty(tmp_path):
    path = write(tmp_path, "# only a comment\n")
    load_yaml(path)
    document = yamlcache.cached(yamlcache.entry(path.read_bytes()), path)
    assert document is not None and document.empty and document.data == {}


def test_keys_json_cannot_hold_are_not_cached(tmp_path):
    path = write(tmp_path, "name: demo\n1: one\n")
    assert load_yaml(path).data == {"name": "demo", 1: "one"}
    assert yamlcache.cached(yamlcache.entry(path.read_bytes()), path) is None
    assert load_yaml(path).data == {"name": "demo", 1: "one"}  # parsed again, the same


def test_a_file_that_does_not_parse_is_never_cached(tmp_path):
    path = write(tmp_path, "name: [unclosed\n")
    for _ in range(2):
        with pytest.raises(ManifestError, match=r"tftrain.yml:2: .*invalid YAML"):
            load_yaml(path)
    assert not yamlcache.directory().exists() or not list(yamlcache.directory().glob("*.json"))


@pytest.mark.parametrize(
    "entry",
    [
        "not json",
        "[]",
        '{"format": 1, "empty": false, "data": {}, "lines": [[["a"], "1"]]}',
        '{"format": 1, "empty": false, "data": {"a": {"$set": [1]}}, "lines": [[[true], 1]]}',
        '{"format": 1, "empty": "no", "data": {}, "lines": []}',
        '{"format": 0, "empty": false, "data": {}, "lines": []}',
        pytest.param(
            '{"format": 1, "empty": false, "data": ' + "[" * 100_000 + "]" * 100_000 + ', "lines": []}',
            id="nested-100k-deep",
        ),
    ],
)
def test_an_entry_that_is_not_ours_is_parsed_again(tmp_path, entry):
    path = write(tmp_path, MANIFEST)
    expected = load_yaml(path)
    cached = next(yamlcache.directory().glob("*.json"))
    cached.write_text(entry)
    assert yamlcache.cached(yamlcache.entry(path.read_bytes()), path) is None
    assert same(load_yaml(path).data, expected.data)
    assert json.loads(cached.read_text())["format"] == yamlcache.FORMAT  # written again


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(blocker))  # a file where the directory should be
    path = write(tmp_path, MANIFEST)
    assert load_yaml(path).data["name"] == "demo"
    assert yamlcache.cached(yamlcache.entry(path.read_bytes()), path) is None


def test_the_oldest_entries_go(tmp_path, monkeypatch):
    monkeypatch.setattr(yamlcache, "MAX_ENTRIES", 4)
    for number in range(5):
        load_yaml(write(tmp_path, f"name: demo{number}\n"))
    left = list(yamlcache.directory().glob("*.json"))
    assert len(left) == 2
    assert yamlcache.cached(yamlcache.entry(b"name: demo4\n"), tmp_path / "tftrain.yml") is not None  # the newest stays


def test_parse_is_what_load_yaml_did_without_the_cache(tmp_path):
    path = write(tmp_path, MANIFEST)
    assert same(parse(path, MANIFEST).data, load_yaml(path).data)
