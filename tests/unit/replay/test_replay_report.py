"""replay.json: its line, its table, its thresholds, and read back as hostile input."""

from __future__ import annotations

import pytest

from runner.replay.compare import Agreement
from runner.replay.report import Disagreement, Latency, OutputDelta, ReplayReport, StatusDifference


def report(**changes) -> ReplayReport:
    fields = dict(
        candidate="m (this run)",
        baseline="m-v3",
        origin="replay/requests.jsonl",
        requests=1000,
        answered=1000,
        agreed=996,
        by=Agreement.TOP_CLASS,
        tolerance=1e-3,
        concurrency=4,
        outputs={"predictions": OutputDelta(max_abs=0.03, mean_abs=0.001)},
        disagreeing=4,
        worst=[Disagreement(id="r-7", max_abs=0.03)],
        candidate_latency=Latency(p50_ms=2.0, p99_ms=5.5),
        baseline_latency=Latency(p50_ms=2.0, p99_ms=5.0),
    )
    return ReplayReport(**{**fields, **changes})


def test_the_line_says_agreement_largest_difference_and_latency_against_the_release():
    assert (
        report().line()
        == "replayed 1,000 requests of replay/requests.jsonl: 99.6% same class, max |Δ| 0.03, p99 1.1× m-v3's"
    )
    alone = report(baseline=None, baseline_latency=None, answered=1000, agreed=1000)
    assert (
        alone.line()
        == "replayed 1,000 requests of replay/requests.jsonl against the candidate alone (no earlier version): 1,000"
        " answered, p99 5.5 ms"
    )


def test_thresholds_name_the_disagreeing_requests():
    assert report().problems(0.99, 1.5) == []
    [low] = report(agreed=900).problems(0.99, 1.5)
    assert low == "90.0% answered alike, below min_agreement 99.0% (e.g. r-7)"
    [slow] = report(
        candidate_latency=Latency(p50_ms=2.0, p99_ms=10.0), latency_ratio_low=1.7, latency_ratio_high=2.4
    ).problems(0.99, 1.5)
    assert slow == "p99 2.00× m-v3's (at least 1.70× at 95 % confidence), above max_latency_ratio 1.5"
    noisy = report(candidate_latency=Latency(p50_ms=2.0, p99_ms=10.0), latency_ratio_low=1.2, latency_ratio_high=2.6)
    # a tail that may be noise refuses nothing
    assert noisy.problems(0.99, 1.5) == [] and "p99 2× [1.2, 2.6] m-v3's" in noisy.line()
    assert report(candidate_latency=Latency(p50_ms=2.0, p99_ms=10.0)).problems(0.99, None) == []
    assert report(baseline=None, answered=990, agreed=990).problems(0.99, 1.5) == [
        "the candidate answered 990 of 1000 requests"
    ]


def test_the_table_escapes_what_another_party_named():
    table = report(
        worst=[Disagreement(id="a|b`c", max_abs=None)],
        statuses=[StatusDifference(id="s", candidate=400, baseline=200)],
        status_differences=1,
        outputs={"x|y": OutputDelta(max_abs=None, mean_abs=None)},
    ).markdown()
    assert (
        "`a\\|b'c` (∞ (another shape, or no answer))" in table
        and "| x\\|y | ∞ (another shape, or no answer) |" in table
        and "`s` 400 vs 200" in table
    )


def test_written_and_read_back(tmp_path):
    path = tmp_path / "replay.json"
    path.write_text(report().to_text())
    assert ReplayReport.read(path) == report()


@pytest.mark.parametrize(
    "text",
    [
        '{"candidate": "c"}',
        '{"requests": -1}',
        "[1, 2]",
        '{"candidate": "c", "requests": 1, "answered": 1, "agreed": 1, "tolerance": Infinity, "concurrency": 1}',
    ],
)
def test_a_bad_report_is_one_line_naming_the_file(tmp_path, text):
    path = tmp_path / "replay.json"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        ReplayReport.read(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_request_only_the_baseline_answered_counts_against_the_candidate():
    failing = report(
        answered=700,
        agreed=700,
        candidate_failed=300,
        statuses=[StatusDifference(id="r-1", candidate=400, baseline=200)],
        status_differences=300,
    )
    assert failing.agreement == 0.7
    [problem] = failing.problems(0.99, None)
    assert problem.startswith("70.0% answered alike, below min_agreement 99.0%")
