"""A replay whose model server ended on the way: one line saying which, how, after how many answers,
its last words and its log; the sending stops asking it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.errors import ReplayError
from runner.replay.engine import _check_alive, _ended
from runner.replay.sending import NO_ANSWER, Sent


def side(label: str, status: int | None, tail: list[str]) -> SimpleNamespace:
    process = SimpleNamespace(poll=lambda: status)
    return SimpleNamespace(
        server=SimpleNamespace(process=process, served=SimpleNamespace(label=label), tail=tail, log=Path(f"/l/{label}"))
    )


def test_a_server_killed_on_the_way_is_named_with_its_signal_answers_last_words_and_log():
    sides = [side("m@v2", -9, ["loading", "tftrain-serve: error: out of memory"]), side("m@v1", None, [])]
    answers = [[Sent(200, {}, 0.1)] * 3 + [NO_ANSWER] * 7, [Sent(200, {}, 0.1)] * 10]
    with pytest.raises(ReplayError) as caught:
        _check_alive(sides, answers)
    assert str(caught.value) == (
        "m@v2's model server ended during the replay (killed by signal 9) after answering 3 of 10 requests:"
        " tftrain-serve: error: out of memory (log: /l/m@v2)"
    )


def test_an_exit_status_is_said_as_one_and_servers_still_running_pass():
    with pytest.raises(ReplayError, match=r"m@v1's model server ended during the replay \(exit 3\)"):
        _check_alive([side("m@v2", None, []), side("m@v1", 3, [])], [[NO_ANSWER], [NO_ANSWER]])
    _check_alive([side("m@v2", None, []), side("m@v1", None, [])], [[NO_ANSWER], [NO_ANSWER]])
    assert _ended(side("m", None, [])) is None and _ended(side("m", 0, [])) == 0
