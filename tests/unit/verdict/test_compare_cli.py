"""`tftrain compare`: the verdict, its few lines or its JSON, --fail-on-regression's exit, and bad
input (unknown refs, no evidence, a margin out of range, damaged evidence) as one line and its exit code."""

from __future__ import annotations

import json
import os

import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once
from verdicts import finished_run, scores

from runner.errors import EvidenceError, NotFoundError, Regression, UsageError


def one_error(result, code: int, words: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.fixture
def pair(home):
    """demo-1: a baseline (3 seeds at 0.90), demo-2: a clearly better candidate (3 seeds at 0.97), same 2,000 examples."""
    finished_run(home, seeds=scores(0.90, 2000, 3, 1), primary=0.90, register=True)
    finished_run(home, seeds=scores(0.97, 2000, 3, 2), primary=0.97)
    return home


def test_a_better_candidate_prints_the_verdict_and_its_few_lines(pair, cli):
    result = cli("compare", "demo-2", "demo@v1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0].startswith("correct 0.97")
        and "(3 seeds) vs demo@v1 0.89" in lines[0]
        and lines[0].endswith("→ better")
    )
    assert lines[1].startswith("  candidate demo-2: correct 0.97") and "sd over 3 seeds" in lines[1]
    assert lines[2].startswith("  baseline  demo@v1: correct 0.89")
    assert lines[3].startswith("  Δ +") and "95 % CI [" in lines[3] and "over 2000 examples" in lines[3]
    assert lines[4].startswith("  P(better) 1.000") and lines[5].startswith("  method: paired variance components")


def test_json_and_the_regression_exit(pair, cli):
    result = cli("compare", "demo-2", "demo-1", "--json", "--margin", "0.01", "--confidence", "0.9")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {
        "verdict",
        "metric",
        "goal",
        "delta",
        "ci",
        "confidence",
        "margin",
        "p_better",
        "seeds",
        "examples",
        "method",
    } <= set(data)
    assert (data["verdict"], data["metric"], data["goal"], data["confidence"], data["margin"]) == (
        "better",
        "correct",
        "maximize",
        0.9,
        0.01,
    )
    assert data["seeds"] == {"candidate": 3, "baseline": 3} and data["examples"] == 2000 and data["ci"][0] > 0.05
    assert data["point"] == {"metric": "accuracy", "candidate": 0.97, "baseline": 0.90}

    assert cli("compare", "demo-1", "demo-2").returncode == 0  # worse, but not asked to fail
    result = cli("compare", "demo-1", "demo-2", "--fail-on-regression")
    assert result.returncode == Regression.exit_code == 15
    assert (
        "→ worse" in result.stdout and "demo-1 is worse than demo-2 on correct (--fail-on-regression)" in result.stderr
    )


def test_the_margin_and_confidence_default_to_the_candidate_runs_evaluation_section(home, cli):
    section = {
        "evaluation": {"per_example": "outputs/eval.jsonl", "metric": "correct", "margin": 0.2, "confidence": 0.8}
    }
    finished_run(home, seeds=scores(0.90, 500, 3, 1))
    finished_run(home, manifest=section, seeds=scores(0.91, 500, 3, 2))
    data = json.loads(cli("compare", "demo-2", "demo-1", "--json").stdout)
    assert (data["margin"], data["confidence"], data["verdict"]) == (0.2, 0.8, "equivalent")


def test_a_baseline_without_evidence_and_no_script_is_inconclusive_with_the_point_values(home, cli):
    finished_run(home, primary=0.95, register=True)  # a version from before evaluation:
    finished_run(home, seeds=scores(0.97, 200, 2, 2), primary=0.97)
    result = cli("compare", "demo-2", "demo@v1")
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == "correct vs demo@v1: inconclusive (demo@v1 kept no per-example evidence; no evaluation.script to score "
        "it on this run's set); point values accuracy 0.97 vs 0.95 (+0.02, one draw each)"
    )
    data = json.loads(cli("compare", "demo-2", "demo@v1", "--json", "--fail-on-regression").stdout)
    assert data["verdict"] == "inconclusive" and data["delta"] is None and "no evaluation.script" in data["reason"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (("nosuch", "demo-1"), NotFoundError.exit_code, "'nosuch' is not a run here"),
        (("demo-2", "demo@v7"), NotFoundError.exit_code, "demo@v7"),
        (("demo-3", "demo-1"), EvidenceError.exit_code, "the candidate demo-3 kept no per-example evidence"),
        (
            ("demo-2", "demo-1", "--margin", "-0.1"),
            UsageError.exit_code,
            "--margin -0.1: must be a finite number, not negative",
        ),
        (("demo-2", "demo-1", "--margin", "nan"), UsageError.exit_code, "--margin nan"),
        (
            ("demo-2", "demo-1", "--margin", "1"),
            EvidenceError.exit_code,
            "evaluation.margin 1 is not below the metric's range (1)",
        ),
        (
            ("demo-2", "demo-1", "--confidence", "1"),
            UsageError.exit_code,
            "--confidence 1: must be at least 0.5 and below 1",
        ),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(pair, cli, args, code, words):
    finished_run(pair)  # demo-3: no evidence
    one_error(cli("compare", *args), code, words)


@pytest.mark.parametrize(
    "damage, words",
    [
        ("nan", "demo-2: evaluation/seed-0.jsonl:2: not a JSON object (NaN is not a number JSON allows)"),
        ("duplicate", "demo-2: evaluation/seed-0.jsonl: id 'x0' appears twice (row 2 repeats it)"),
        ("link", "a link (evidence is read only from a regular file)"),
        ("fifo", "not a regular file"),
        ("summary", "evaluation.json: cannot be read"),
        ("seed name", "seeds[0].file is not seed-N.jsonl"),
    ],
)
def test_damaged_evidence_is_one_line_and_exit_32(pair, cli, tmp_path, damage, words):
    kept = pair / "runs" / "demo-2" / "evaluation"
    seed = kept / "seed-0.jsonl"
    lines = seed.read_text().splitlines()
    if damage == "nan":
        seed.write_text(
            "\n".join([lines[0], lines[1].replace(": 1.0", ": NaN").replace(": 0.0", ": NaN"), *lines[2:]]) + "\n"
        )
    elif damage == "duplicate":
        seed.write_text("\n".join([lines[0], lines[0], *lines[2:]]) + "\n")
    elif damage == "link":
        (tmp_path / "elsewhere.jsonl").write_text(seed.read_text())
        seed.unlink()
        seed.symlink_to(tmp_path / "elsewhere.jsonl")
    elif damage == "fifo":
        seed.unlink()
        os.mkfifo(seed)
    elif damage == "summary":
        (kept / "evaluation.json").write_text('{"metric": ')
    else:
        summary = json.loads((kept / "evaluation.json").read_text())
        summary["seeds"][0]["file"] = "../../../etc/passwd"
        (kept / "evaluation.json").write_text(json.dumps(summary))
    one_error(cli("compare", "demo-2", "demo-1"), EvidenceError.exit_code, words)


def test_the_manifest_given_with_f_sets_the_rules(pair, cli, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    (tmp_path / "tftrain.yml").write_text(
        "name: demo\nsource_directory: src\nentry_script: train.py\n"
        "evaluation: {per_example: outputs/eval.jsonl, metric: correct, margin: 0.3}\n"
    )
    data = json.loads(cli("compare", "demo-2", "demo@v1", "--json", "-f", str(tmp_path / "tftrain.yml")).stdout)
    assert data["margin"] == 0.3
    (tmp_path / "tftrain.yml").write_text(
        "name: demo\nsource_directory: src\nentry_script: train.py\n"
        "evaluation: {per_example: outputs/eval.jsonl, metric: loss}\n"
    )
    one_error(
        cli("compare", "demo-2", "demo@v1", "-f", str(tmp_path / "tftrain.yml")),
        EvidenceError.exit_code,
        "demo-2's evidence scores 'correct', not 'loss' (evaluation.metric)",
    )
