"""`tftrain replay`'s options refused in one line before anything is read or started, and its report
file (-o) written after the report is printed, one line when it cannot be."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

import pytest

from runner.cli import replay
from runner.errors import DiskFullError, UsageError


def options(**given) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    replay.add_arguments(parser)
    args = parser.parse_args(["requests.jsonl", "--candidate", "m@v2"])
    for name, value in given.items():
        setattr(args, name, value)
    return args


@pytest.mark.parametrize(
    "given, words",
    [
        ({"candidate": None}, "give the version to replay with --candidate REF"),
        ({"concurrency": 0}, "--concurrency 0: 1 to 64"),
        ({"tolerance": float("nan")}, "--tolerance nan: a number from 0 to 1e+06"),
        ({"max_latency_ratio": 0.0}, "--max-latency-ratio 0: a number from 0.001 to 1000"),
        ({"max_requests": 0}, "--max-requests 0: at least 1"),
        ({"warmup": Path("w")}, "are replay export's"),
        ({"output": Path("/")}, "-o /: a directory: give the report file's name"),
        ({"output": Path("/no-such-dir/replay.json")}, "-o /no-such-dir/replay.json: /no-such-dir is not a directory"),
    ],
)
def test_what_cannot_be_replayed_as_asked_is_one_usage_line(given, words):
    with pytest.raises(UsageError) as caught:
        replay.check_options(options(**given))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_good_options_pass(tmp_path):
    replay.check_options(options(output=tmp_path / "replay.json", min_agreement=0.99, max_latency_ratio=1.5))


@pytest.mark.parametrize(
    "number, kind, words",
    [
        (errno.ENOSPC, DiskFullError, "disk full writing"),
        (errno.EACCES, UsageError, "cannot be written (Permission denied)"),
    ],
)
def test_a_report_file_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, number, kind, words):
    def refused(self, text):
        raise OSError(number, {errno.ENOSPC: "No space left on device", errno.EACCES: "Permission denied"}[number])

    monkeypatch.setattr(Path, "write_text", refused)
    with pytest.raises(kind) as caught:
        replay.write_report(tmp_path / "replay.json", "{}")
    assert words in str(caught.value) and str(tmp_path / "replay.json") in str(caught.value)


def test_the_report_file_is_written_whole(tmp_path):
    replay.write_report(tmp_path / "replay.json", '{"answered": 1}\n')
    assert (tmp_path / "replay.json").read_text() == '{"answered": 1}\n'


def test_the_servers_logs_are_kept_only_when_the_error_names_one():
    with replay.servers_logs() as logs:
        (logs / "candidate.log").write_text("served")
    assert not logs.exists()
    with pytest.raises(UsageError):
        with replay.servers_logs() as logs:
            raise UsageError("the two versions take different inputs")
    assert not logs.exists()
    with pytest.raises(UsageError):
        with replay.servers_logs() as logs:
            raise UsageError(f"m@v2's model server ended during the replay (exit 1): … (log: {logs}/candidate.log)")
    assert logs.is_dir()
    logs.rmdir()
