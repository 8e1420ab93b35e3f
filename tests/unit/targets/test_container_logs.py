"""What a followed docker log missed at its end is found in the log's tail and added once."""

from __future__ import annotations

from runner.targets.container import missing_tail

LOG = b'starting\nepoch 1\nepoch 2\nTraceback (most recent call last):\n  File "train.py", line 3\nValueError: bad\n'


def test_nothing_is_added_when_the_follow_got_everything():
    assert missing_tail(LOG, LOG[LOG.index(b"epoch 2") :]) == b""
    assert missing_tail(LOG, LOG) == b""
    assert missing_tail(LOG, b"") == b""


def test_the_lines_the_follow_missed_are_added():
    copied = LOG[: LOG.index(b"Traceback")]
    assert missing_tail(copied, LOG[LOG.index(b"epoch 1") :]) == LOG[LOG.index(b"Traceback") :]
    assert copied + missing_tail(copied, LOG) == LOG


def test_repeated_lines_line_up_with_the_longest_overlap():
    copied = b"x\nx\nx\n"
    assert missing_tail(copied, b"x\nx\nx\ny\n") == b"y\n"
    assert missing_tail(b"", b"a\nb\n") == b"a\nb\n"  # nothing copied: all of it


def test_a_tail_that_does_not_line_up_is_added_whole():
    assert missing_tail(b"first\nsecond\n", b"ninth\ntenth\n") == b"ninth\ntenth\n"
