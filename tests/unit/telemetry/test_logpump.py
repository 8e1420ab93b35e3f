from __future__ import annotations

import io
import os
import threading
import time

from runner.manifest.model import MetricsSpec
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LogPump
from runner.telemetry.parsers import LogMetricParser
from runner.telemetry.point import MetricPoint
from runner.telemetry.recorder import MetricsRecorder


class Capture(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()


def pump_bytes(tmp_path, payloads: dict[int, bytes], prefix: bool, sink=None):
    stream = Capture()
    logger = Logger(stream)
    pump = LogPump(logger, tmp_path, prefix_ranks=prefix)
    writers = []
    for rank, payload in payloads.items():
        read_fd, write_fd = os.pipe()
        pump.add(rank, read_fd, sink)
        writers.append(threading.Thread(target=_write_all, args=(write_fd, payload)))
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    pump.join()
    logger.flush()
    return stream.buffer.getvalue()


def _write_all(fd: int, payload: bytes) -> None:
    with os.fdopen(fd, "wb") as handle:
        for start in range(0, len(payload), 4096):
            handle.write(payload[start : start + 4096])


def test_every_byte_reaches_the_rank_log_and_the_console(tmp_path):
    payload = b"".join(b"line %d\n" % i for i in range(20000))
    console = pump_bytes(tmp_path, {0: payload}, prefix=False)
    assert (tmp_path / "0.log").read_bytes() == payload
    assert console == payload


def test_ranks_are_prefixed_and_never_split_mid_line(tmp_path):
    payloads = {rank: b"".join(b"rank %d line %d\n" % (rank, i) for i in range(5000)) for rank in (0, 1)}
    console = pump_bytes(tmp_path, payloads, prefix=True)
    for rank in (0, 1):
        assert (tmp_path / f"{rank}.log").read_bytes() == payloads[rank]
    lines = console.splitlines()
    assert len(lines) == 10000
    for line in lines:
        rank = int(line[1:2])
        assert line.startswith(b"[%d] rank %d line " % (rank, rank))


def test_last_line_without_newline_is_kept(tmp_path):
    console = pump_bytes(tmp_path, {0: b"first\nno newline at end"}, prefix=False)
    assert console == b"first\nno newline at end\n"
    assert (tmp_path / "0.log").read_bytes().startswith(b"first\nno newline at end")


def test_progress_bars_collapse_on_the_console_but_not_in_the_log(tmp_path):
    payload = b"1/3 working\r2/3 working\r3/3 done\nnext\n"
    console = pump_bytes(tmp_path, {0: payload}, prefix=False)
    assert console == b"3/3 done\nnext\n"
    assert (tmp_path / "0.log").read_bytes() == payload


def test_sink_sees_whole_lines(tmp_path):
    seen = []
    pump_bytes(tmp_path, {0: b"a" * 10000 + b"\nb\n"}, prefix=False, sink=seen.append)
    assert b"".join(seen) == b"a" * 10000 + b"\nb\n"
    assert all(chunk.endswith(b"\n") for chunk in seen)


class BlockedStream(Capture):
    """A console nobody reads: every write blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.buffer = self

    def write(self, data):  # noqa: D401 - io signature
        self.release.wait()
        return super().write(data.decode() if isinstance(data, bytes) else data)


def test_a_blocked_console_never_blocks_the_pump_and_says_what_it_skipped(tmp_path):
    stream = BlockedStream()
    logger = Logger(stream, max_queued=64 << 10)
    pump = LogPump(logger, tmp_path, prefix_ranks=False)
    read_fd, write_fd = os.pipe()
    pump.add(0, read_fd)
    payload = b"".join(b"line %07d\n" % i for i in range(200000))  # 2.4 MB, far above the budget
    started = time.monotonic()
    _write_all(write_fd, payload)
    pump.join()
    assert time.monotonic() - started < 30
    assert (tmp_path / "0.log").read_bytes() == payload  # all on disk while the console was stuck
    stream.release.set()
    logger.flush()
    shown = stream.getvalue()
    assert "lines not shown (console too slow); all are in" in shown
    assert len(shown) < len(payload)


def test_mpirun_tagged_fragments_are_joined_per_rank(tmp_path):
    """Open MPI tags every write, and Python writes a line's text and its newline apart."""
    payload = (
        b"[1,0]<stdout>:horovod rank 0 of size 2[1,1]<stdout>:horovod rank 1 of size 2[1,0]<stdout>:\n"
        b"[1,1]<stdout>:\n[1,0]<stderr>:warning one\n[1,0]<stdout>:two lines\nin one write\n"
        b"[1,1]<stdout>:no newline at the end"
    )
    stream = Capture()
    logger = Logger(stream)
    pump = LogPump(logger, tmp_path, prefix_ranks=True)
    read_fd, write_fd = os.pipe()
    pump.add_tagged(read_fd, {0: None, 1: None}, "mpirun")
    with os.fdopen(write_fd, "wb") as handle:
        for index in range(0, len(payload), 7):  # reads may cut anywhere, even inside a tag
            handle.write(payload[index : index + 7])
            handle.flush()
    pump.join()
    logger.flush()
    assert (tmp_path / "0.log").read_bytes() == b"horovod rank 0 of size 2\nwarning one\ntwo lines\nin one write\n"
    assert (tmp_path / "1.log").read_bytes() == b"horovod rank 1 of size 2\nno newline at the end\n"
    assert (tmp_path / "mpirun.log").read_bytes() == b""


def test_a_full_disk_stops_the_log_but_never_the_pump(tmp_path):
    """ENOSPC for real: the rank log is /dev/full. The pipe is still drained to its end (the
    training never blocks), the console and the parser still get every line, and the pump says
    it once and tells the run."""
    (tmp_path / "0.log").symlink_to("/dev/full")
    stream = Capture()
    logger = Logger(stream)
    pump = LogPump(logger, tmp_path, prefix_ranks=False)
    read_fd, write_fd = os.pipe()
    seen = []
    pump.add(0, read_fd, seen.append)
    payload = b"".join(b"line %06d\n" % i for i in range(300_000))  # 3.3 MB: far more than a pipe holds
    writer = threading.Thread(target=_write_all, args=(write_fd, payload))
    writer.start()
    writer.join(timeout=60)
    assert not writer.is_alive(), "the training blocked on a pump that stopped draining"
    pump.join()
    logger.flush()
    assert b"".join(seen) == payload
    assert pump.disk_full == tmp_path / "0.log"
    assert pump.failure == f"disk full writing {tmp_path / '0.log'}"
    console = stream.buffer.getvalue()
    assert console.count(b"disk full writing") == 1
    assert console.replace(b"\n", b"").endswith(b"line 299999")


def test_a_failing_parser_loses_the_metrics_not_the_log(tmp_path):
    def broken(lines: bytes) -> None:
        raise RuntimeError("parser bug")

    console = pump_bytes(tmp_path, {0: b"one\ntwo\n"}, prefix=False, sink=broken)
    assert (tmp_path / "0.log").read_bytes() == b"one\ntwo\n"
    assert b"metrics from" in console and b"RuntimeError: parser bug" in console


MARKUP = ("bad token [/INST]", "[bold]not bold[/bold]", "closing [/] tag", "[red", "x[/x]y", ":smile:")


def test_user_text_is_printed_as_text_never_as_markup():
    stream = Capture()
    logger = Logger(stream)
    for text in MARKUP:
        logger.info(text)
        logger.warning(text)
        logger.error(text)
        logger.phase(text)
        logger.phase_done(text, 1.0)
        logger.table(text, [text], [[text]], highlight_row=0)
        logger.metrics([MetricPoint(text, 1.0, 2, 0.0, "log")])
    logger.flush()
    out = stream.buffer.getvalue().decode()
    for text in MARKUP:
        assert out.count(text) == 9, text  # info, warning, error, phase, done, table ×3, metric


def test_a_metric_regex_named_like_markup_keeps_the_pump_alive(tmp_path):
    """The recorder prints points from the pump's thread: a name like `[/x]` must not kill it."""
    stream = Capture()
    logger = Logger(stream)
    spec = MetricsSpec(regex={"acc[/x]": r"acc=([0-9.]+)"})
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", spec, logger.metrics)
    pump = LogPump(logger, tmp_path, prefix_ranks=False)
    read_fd, write_fd = os.pipe()
    pump.add(0, read_fd, LogMetricParser(spec.regex, recorder.record).feed)
    with os.fdopen(write_fd, "wb", buffering=0) as handle:
        for i in range(4):
            handle.write(b"acc=0.%d\n" % i)
            time.sleep(0.01)
    pump.join()
    recorder.close()
    logger.flush()
    assert (tmp_path / "0.log").read_bytes() == b"acc=0.0\nacc=0.1\nacc=0.2\nacc=0.3\n"
    assert recorder.as_dict()["metrics"]["acc[/x]"]["count"] == 4
    assert "acc[/x]=0" in stream.buffer.getvalue().decode()
