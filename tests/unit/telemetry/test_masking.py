"""Secret values never leave tftrain unmasked: the Masker, and every sink that passes through it."""

from __future__ import annotations

import io
import json
import os
import random
import threading

from runner.manifest.model import MetricsSpec
from runner.settings import LoggerSettings
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import MAX_LINE, LogPump
from runner.telemetry.masking import Masker
from runner.telemetry.metricsfile import MetricsFileFollower, mask_metrics_files
from runner.telemetry.point import MetricPoint, read_series
from runner.telemetry.recorder import MetricsRecorder

SECRET = "tok-9f8e7d6c5b4a"
QUOTED = 'pa"ss\\word-42'  # stored JSON-escaped as pa\"ss\\word-42
MULTI = "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\nhkiG9w0BAQEFAASC\n-----END KEY-----"
ALL = (SECRET, QUOTED, MULTI)


class Capture(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()


def leaks(text: str | bytes) -> list[str]:
    """Every secret, or line of one, found in `text` (as is or JSON-escaped)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = []
    for value in ALL:
        for part in [value, *value.splitlines()]:
            for form in {part, json.dumps(part)[1:-1]}:
                if form in text:
                    found.append(form)
    return found


def test_values_lines_and_json_forms_are_masked():
    masker = Masker(ALL)
    text = f"a {SECRET} b {json.dumps(QUOTED)} c {QUOTED} d " + " / ".join(MULTI.splitlines())
    assert masker.text(text) == 'a *** b "***" c *** d *** / *** / *** / ***'
    assert masker.chunk(MULTI.encode() + b"\n") == b"***\n"
    assert masker.text("ab\ncd\n") == "ab\ncd\n"  # nothing else is touched
    assert leaks(masker.text(json.dumps({"k": [QUOTED, MULTI]}))) == []


def test_short_lines_of_a_multi_line_secret_are_not_masked_alone():
    masker = Masker(["abc\n}\nlonger-line"])
    assert masker.text("} abc longer-line") == "} abc ***"


def test_data_masks_every_string_keys_included_before_serialising():
    masker = Masker(ALL)
    record = {SECRET: [QUOTED, {"x": f"is {SECRET}"}, 3, None], "n": 1.5}
    assert masker.data(record) == {"***": ["***", {"x": "is ***"}, 3, None], "n": 1.5}
    assert leaks(json.dumps(masker.data(record))) == []


def test_overlapping_secrets_are_masked_as_one():
    masker = Masker(["abcdef", "defghi"])
    assert masker.text("xabcdefghiy") == "x***y"


def test_safe_end_never_cuts_a_secret():
    masker = Masker([SECRET])
    data = b"x " * 50 + SECRET.encode()[:5]
    end = masker.safe_end(data)
    assert end == len(data) - (len(SECRET) - 1)  # the start of a secret may be in the rest
    spaced = "ab cdefghijklmnop"
    masker = Masker([spaced])
    data = b"x " * 50 + spaced.encode() + b"y" * 5
    assert 100 + 3 < len(data) - (masker.longest - 1) < 100 + len(spaced)  # the cut falls after the secret's space
    assert masker.safe_end(data) == 100 + len(spaced)  # moved past the secret that straddled the cut


def test_safe_end_never_cuts_a_word_that_may_be_a_url():
    assert Masker().safe_end(b"see https://u:pw@h/x") == len(b"see ")  # its @ may come in the next read
    assert Masker([SECRET]).safe_end(b"x " * 50 + SECRET.encode() + b"yyy") == 100
    assert Masker().safe_end(b"done\n") == len(b"done\n")
    assert Masker().safe_end(b"x" * 10_000) == 10_000  # longer than any URL: cut where it is


def test_mask_file_in_blocks_across_block_boundaries(tmp_path, monkeypatch):
    import runner.telemetry.masking

    monkeypatch.setattr(runner.telemetry.masking, "BLOCK", 7)  # secrets straddle every block boundary
    path = tmp_path / "0.jsonl"
    lines = [json.dumps({"name": f"m-{SECRET}", "value": 1}), json.dumps({"tag": QUOTED}), json.dumps({"e": MULTI})]
    path.write_text("\n".join(lines) + "\n")
    assert Masker(ALL).mask_file(path)
    text = path.read_text()
    assert leaks(text) == []
    assert [json.loads(line) for line in text.splitlines()] == [
        {"name": "m-***", "value": 1},
        {"tag": "***"},
        {"e": "***"},
    ]
    assert list(tmp_path.iterdir()) == [path]


def pump(tmp_path, payload: bytes, piece: int | None = None, sink=None) -> tuple[bytes, Logger]:
    """`payload` through a LogPump given the run's secrets, written in pieces of
    `piece` bytes (random sizes when None); returns the console."""
    stream = Capture()
    logger = Logger(stream)
    log_pump = LogPump(logger, tmp_path, prefix_ranks=False, secrets=ALL)
    read_fd, write_fd = os.pipe()
    log_pump.add(0, read_fd, sink)
    writer = threading.Thread(target=_write, args=(write_fd, payload, piece))
    writer.start()
    writer.join()
    log_pump.join()
    logger.flush()
    return stream.buffer.getvalue(), logger


def _write(fd: int, payload: bytes, piece: int | None) -> None:
    rng = random.Random(7)
    with os.fdopen(fd, "wb", buffering=0) as handle:
        position = 0
        while position < len(payload):
            size = piece or rng.randint(1, 200_000)
            handle.write(payload[position : position + size])
            position += size


def test_the_pump_masks_secrets_split_across_reads(tmp_path):
    payload = f"token {SECRET} and {QUOTED}\n".encode() * 50
    console, _ = pump(tmp_path, payload, piece=7)
    log = (tmp_path / "0.log").read_bytes()
    assert log == b"token *** and ***\n" * 50
    assert console == log


def test_a_multi_line_secret_printed_line_by_line_is_masked(tmp_path):
    payload = b"".join(b"line: " + line.encode() + b"\n" for line in MULTI.splitlines()) + MULTI.encode() + b"\n"
    console, _ = pump(tmp_path, payload, piece=5)
    log = (tmp_path / "0.log").read_bytes()
    assert leaks(log) == [] and leaks(console) == []
    # the whole value is masked as one, or line by line when its lines arrive in separate reads
    head = b"line: ***\n" * 4
    assert log.startswith(head) and set(log[len(head) :].split()) == {b"***"}


def test_a_secret_at_the_1_mib_cut_is_masked_whole(tmp_path):
    """A line over MAX_LINE is cut: wherever the cut falls, the secrets around it stay whole."""
    unit = ("-" + SECRET).encode()
    line = unit * (3 * MAX_LINE // 2 // len(unit))  # 1.5 MiB of secrets: every cut lands in one
    seen = []
    console, _ = pump(tmp_path, b"before\n" + line + b"\nafter\n", sink=seen.append)
    log = (tmp_path / "0.log").read_bytes()
    assert leaks(log) == [] and leaks(console) == [] and leaks(b"".join(seen)) == []
    assert log.startswith(b"before\n") and log.endswith(b"\nafter\n")
    body = log[len(b"before\n") : -len(b"\nafter\n")]
    assert body.count(b"\n") >= 1  # it was cut
    assert body.replace(b"\n", b"") == b"-***" * (len(line) // len(unit))


def test_mpirun_tagged_long_lines_are_cut_without_leaking(tmp_path):
    stream = Capture()
    logger = Logger(stream)
    log_pump = LogPump(logger, tmp_path, prefix_ranks=True, secrets=(SECRET,))
    read_fd, write_fd = os.pipe()
    log_pump.add_tagged(read_fd, {0: None}, "mpirun")
    unit = ("-" + SECRET).encode()
    line = unit * (3 * MAX_LINE // 2 // len(unit))
    threading.Thread(target=_write, args=(write_fd, b"[1,0]<stdout>:" + line + b"\n", None)).start()
    log_pump.join()
    logger.flush()
    log = (tmp_path / "0.log").read_bytes()
    assert SECRET.encode() not in log and SECRET.encode()[:8] not in log and SECRET.encode()[-8:] not in log
    assert log.replace(b"\n", b"") == b"-***" * (len(line) // len(unit))


def test_the_logger_masks_everything_it_prints_github_commands_included():
    stream = Capture()
    logger = Logger(stream, settings=LoggerSettings.from_environment({"GITHUB_ACTIONS": "true"}))
    secret = "50%:off,now"  # escaped by GitHub's command syntax: masked before escaping
    logger.mask(secret)
    logger.mask(MULTI)
    logger.info(f"info {secret}")
    logger.warning(f"warn {secret} {MULTI}")
    logger.table("t", ["c"], [[f"{secret}" * 3]])
    logger.metrics([MetricPoint(f"m{secret}", 1.0, 1, 0.0, "log")])
    logger.flush()
    out = stream.buffer.getvalue().decode()
    lines = out.splitlines()
    masks = [line for line in lines if line.startswith("::add-mask::")]
    assert masks == ["::add-mask::50%25:off,now", *(f"::add-mask::{line}" for line in MULTI.splitlines())]
    rest = "\n".join(line for line in lines if not line.startswith("::add-mask::"))
    assert secret not in rest and "50%25" not in rest and "off%2Cnow" not in rest and leaks(rest) == []
    assert "info ***" in rest and "::warning::warn *** ***" in rest and "m***=1" in rest


def test_the_recorder_masks_names_tags_images_and_the_verdict(tmp_path):
    masker = Masker(ALL)
    shown = []
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), shown.extend, masker)
    recorder.record(
        [MetricPoint(f"acc/{SECRET}", 0.5, 1, 1.0, "log"), MetricPoint(QUOTED, 0.7, 1, 1.0, f"file {SECRET}")]
    )
    recorder.note({"tag": f"t-{SECRET}", "value": MULTI})
    recorder.note({"image": f"outputs/{QUOTED}.png", "name": SECRET})
    recorder.note({"status": "failed", "error": f"bad {SECRET}"})
    recorder.close()
    summary = recorder.as_dict()
    stored = (tmp_path / "metrics.jsonl").read_text() + json.dumps(summary) + json.dumps(recorder.verdict)
    assert leaks(stored) == [] and leaks(repr(shown)) == []
    assert [p.name for p in read_series(tmp_path / "metrics.jsonl")] == ["acc/***", "***"]
    assert summary["tags"] == {"t-***": "***"} and summary["images"][0]["path"] == "outputs/***.png"
    assert recorder.verdict == {"status": "failed", "error": "bad ***"}


def test_the_scripts_metrics_files_are_masked_once_followed(tmp_path):
    path, other = tmp_path / "0.jsonl", tmp_path / "1.jsonl"  # rank 1's is not followed
    path.write_text(
        json.dumps({"name": QUOTED, "value": 1.0, "step": 1})
        + "\n"
        + json.dumps({"status": "failed", "error": MULTI})
        + "\n"
    )
    other.write_text(json.dumps({"name": SECRET, "value": 1.0}) + "\n")
    points, notes = [], []
    follower = MetricsFileFollower(path, points.extend, print, 0, notes.append)
    follower.start()
    follower.stop()
    mask_metrics_files(tmp_path, Masker(ALL), print)
    assert [p.name for p in points] == [QUOTED]  # the recorder masks what it keeps
    assert leaks(path.read_text() + other.read_text()) == []
    assert json.loads(path.read_text().splitlines()[0])["name"] == "***"
