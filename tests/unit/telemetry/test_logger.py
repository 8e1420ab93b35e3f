"""The console: tftrain's own messages styled line by line without rich (which only tables load),
text always as text."""

from __future__ import annotations

import io

from runner.settings import LoggerSettings
from runner.telemetry.logger import Logger


def rendered(message: str, style: str | None, color: bool) -> str:
    logger = Logger(stream=io.StringIO(), settings=LoggerSettings(color=color))
    logger.color = color
    return logger._render(message, style=style).decode()


def test_plain_where_there_is_no_color():
    assert rendered("run x (queued)", "bold", color=False) == "run x (queued)\n"


def test_each_line_styled_on_its_own_as_rich_does():
    assert rendered("one\n\ntwo", "bold green", color=True) == "\x1b[1;32mone\x1b[0m\n\n\x1b[1;32mtwo\x1b[0m\n"


def test_text_is_text():
    assert rendered("[bold]x[/bold] :smile:", "red", color=False) == "[bold]x[/bold] :smile:\n"
    # tabs expanded, control characters dropped, as rich did
    assert rendered("a\tb\rc\x07", None, color=False) == "a       bc\n"


def test_a_table_still_lays_out_with_rich():
    stream = io.StringIO()
    logger = Logger(stream=stream, settings=LoggerSettings(color=False))
    logger.table("metrics", ["name", "last"], [["loss", "0.25"]])
    logger.flush()
    assert "loss" in stream.getvalue() and "0.25" in stream.getvalue() and "metrics" in stream.getvalue()
