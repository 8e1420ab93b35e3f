"""sacct's record of a job, read as hostile text: a good line, garbage, bytes that are not UTF-8, an
empty answer; and which source decides the usage when accounting has no usable record."""

from __future__ import annotations

import pytest

from runner.targets.slurm import accounting
from runner.targets.slurm.accounting import Accounted, NoAccounting, Unreadable, allocation_of, parse, said
from runner.targets.slurm.jobs import JobInfo, JobState, _text


def test_a_good_record():
    assert parse("COMPLETED|0:0|00:00:03|billing=2,cpu=2,gres/gpu=2,node=2|2026-11-29T08:00:00\n") == Accounted(
        JobState.COMPLETED, "0:0", 3.0, 2, None, 2, 2
    )
    long = parse("CANCELLED by 0|0:15|1-02:03:04|cpu=4,mem=4000M,gres/gpu=1|2026-11-29T08:00:00\n")
    assert long.state == JobState.CANCELLED and long.elapsed == 93784.0 and long.mem_bytes == 4000 << 20
    never = parse("CANCELLED by 0|0:0|00:00:00||2026-11-29T08:00:00\n")  # canceled while pending: it held nothing
    assert (never.cpus, never.gpus, never.elapsed) == (None, None, 0.0)
    assert (
        parse("RUNNING|0:0|00:00:01|cpu=1|2026-11-29T08:00:00").state == JobState.RUNNING
    )  # not ended: the caller asks again


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "COMPLETED|0:0|00:00:03\n",  # a field missing
        "COMPLETED|0:0|00:00:03|cpu=2|2026-11-29T08:00:00|extra\n",
        "COMPLETED|0:0|00:00:03|cpu=2|2026-11-29T08:00:00\nCOMPLETED|0:0|00:00:04|cpu=2|2026-11-29T08:00:00\n",  # two of one start
        "WHATEVER|0:0|00:00:03|cpu=2|2026-11-29T08:00:00\n",
        "COMPLETED|zero|00:00:03|cpu=2|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|3 seconds|cpu=2|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|00:00:03|cpu=two|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|00:00:03|cpu|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|00:00:03|cpu=1,cpu=2|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|00:00:03|mem=lots|2026-11-29T08:00:00\n",
        "COMPLETED|0:0|00:00:03|gres/gpu=99999999999999999999|2026-11-29T08:00:00\n",
        "sacct: error: Problem talking to the database: Connection refused\n",
        "<html>502 Bad Gateway</html>",
    ],
)
def test_garbage_is_unreadable(text):
    with pytest.raises(Unreadable):
        parse(text)


def test_bytes_that_are_not_utf8_are_unreadable():
    with pytest.raises(Unreadable, match="not UTF-8"):
        parse(
            _text(b"COMPLETED|0:0|00:00:03|cpu=2,gres/gpu=\xff\xfe|2026-11-29T08:00:00\n")
        )  # as jobs.run decodes sacct's output


def test_the_fallback_without_accounting_says_nothing(monkeypatch):
    def no_accounting(job_id, components=1):
        raise NoAccounting

    monkeypatch.setattr(accounting, "ask", no_accounting)
    warned: list[str] = []
    seconds, allocation = allocation_of("7", JobInfo(JobState.COMPLETED, elapsed=12.0), 12.0, warned.append)
    assert (seconds, allocation.source, warned) == (12.0, "scontrol", [])
    seconds, allocation = allocation_of("7", None, 4.5, warned.append)  # slurmctld forgot it, no jobcomp either
    assert (seconds, allocation.source, warned) == (4.5, "tftrain", [])
    assert said(allocation) == "usage from tftrain's clock: Slurm job 7, 4.5 s"


@pytest.mark.parametrize(
    ("answer", "asked_again"),
    [
        ("\x00\x01 garbage", False),  # garbage does not mend
        ("", True),  # slurmdbd has not heard of the job yet
        ("RUNNING|0:0|00:00:01|cpu=1|2026-11-29T08:00:00", True),  # … nor of its end
    ],
)
def test_accounting_that_fails_is_said_once_and_falls_back(monkeypatch, answer, asked_again):
    asked: list[str] = []

    def answering(job_id, components=1):
        asked.append(job_id)
        return parse(answer)

    monkeypatch.setattr(accounting, "ask", answering)
    monkeypatch.setattr(accounting, "SETTLE_EVERY", 0.01)
    monkeypatch.setattr(accounting, "SETTLE_SECONDS", 0.05)
    warned: list[str] = []
    seconds, allocation = allocation_of("8", JobInfo(JobState.COMPLETED, elapsed=3.0), 3.0, warned.append)
    assert (seconds, allocation.source) == (3.0, "scontrol")
    assert (len(asked) > 1) == asked_again and len(warned) == 1, warned
    assert warned[0].startswith("Slurm accounting (sacct) gives no usable record of job 8: ") and "\n" not in warned[0]
    assert warned[0].endswith("; usage from slurmctld's (scontrol) instead")


def test_a_job_that_never_started_is_asked_about_once_and_its_missing_record_is_no_failure(monkeypatch):
    """An array task scanceled while PENDING beside others: sacct never has a record of it."""
    asked: list[str] = []
    monkeypatch.setattr(accounting, "ask", lambda job_id, components=1: asked.append(job_id) or parse(""))
    seconds, allocation = allocation_of("8_1", None, None, pytest.fail, started=False)
    assert (seconds, allocation.source, asked) == (None, "tftrain", ["8_1"])
    held = "CANCELLED by 0|0:0|00:00:00||None"  # a held task, canceled: a record of its own
    monkeypatch.setattr(accounting, "ask", lambda job_id, components=1: parse(held))
    assert allocation_of("8_1", None, None, pytest.fail, started=False)[1].state == "CANCELLED"


def test_the_record_decides_and_is_said(monkeypatch):
    monkeypatch.setattr(
        accounting,
        "ask",
        lambda job_id, components=1: parse("COMPLETED|0:0|00:00:05|cpu=2,gres/gpu=1,node=1|2026-11-29T08:00:00"),
    )
    seconds, allocation = allocation_of("9", JobInfo(JobState.COMPLETED, elapsed=6.0), 6.0, pytest.fail)
    assert seconds == 5.0 and allocation.source == "sacct" and (allocation.cpus, allocation.gpus) == (2, 1)
    assert said(allocation) == ("usage from Slurm accounting (sacct): job 9 COMPLETED exit 0:0, 5 s, cpu=2, gres/gpu=1")


def test_a_heterogeneous_jobs_components_are_summed():
    text = "COMPLETED|0:0|00:00:05|billing=2,cpu=2,node=1|2026-11-29T08:00:00\nFAILED|1:0|00:00:07|cpu=2,gres/gpu=2,node=1|2026-11-29T08:00:00\n"
    assert parse(text, components=2) == Accounted(JobState.FAILED, "1:0", 7.0, 4, None, 2, 2)
    with pytest.raises(Unreadable, match="1 records of one start where 2 were asked for"):
        parse("COMPLETED|0:0|00:00:05|cpu=2|2026-11-29T08:00:00\n", components=2)


def test_a_requeued_jobs_starts_are_added_and_its_last_decides():
    """sacct -D: the first start PREEMPTED (42 s), the second COMPLETED (26 s); Slurm's own record is the last alone."""
    text = (
        "PREEMPTED|0:0|00:00:42|billing=1,cpu=1,node=1|2026-11-29T08:34:54\n"
        "COMPLETED|0:0|00:00:26|billing=1,cpu=1,node=1|2026-11-29T08:36:49\n"
    )
    record = parse(text)
    assert (record.state, record.exit_code, record.elapsed, record.starts, record.cpus) == (
        JobState.COMPLETED,
        "0:0",
        68.0,
        2,
        1,
    )
    # each start of a two-component job: its records summed, then the starts added
    two = "".join(line + "\n" + line.replace("cpu=1", "cpu=2") + "\n" for line in text.splitlines())
    assert (parse(two, components=2).elapsed, parse(two, components=2).cpus) == (68.0, 3)
    with pytest.raises(Unreadable, match="1 records of one start where 2 were asked for"):
        parse(two + "COMPLETED|0:0|00:00:01|cpu=1|2026-11-29T09:00:00\n", components=2)


def test_a_requeued_jobs_usage_says_its_starts(monkeypatch):
    text = "TIMEOUT|0:0|00:01:00|cpu=2|2026-11-29T08:00:00\nCOMPLETED|0:0|00:00:30|cpu=2|2026-11-29T08:03:00\n"
    monkeypatch.setattr(accounting, "ask", lambda job_id, components=1: parse(text))
    seconds, allocation = allocation_of("11", None, 95.0, pytest.fail)
    assert (seconds, allocation.starts) == (90.0, 2)
    assert (
        said(allocation) == "usage from Slurm accounting (sacct): job 11 COMPLETED exit 0:0, 90 s over 2 starts, cpu=2"
    )
