"""The kept evidence's layout (runs, versions, releases) read back as hostile input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once

from runner.errors import EvidenceError
from runner.manifest.evaluation import EvaluationSpec
from runner.serving.layout import evaluation_asset as release_asset
from runner.serving.layout import evaluation_relative as relative_of_asset
from runner.verdict.evidence import Evidence
from runner.verdict.keeping import data_fingerprint, keep_evidence, version_extras
from runner.verdict.layout import read_set, summary_of


def _workdir(tmp_path, name: str, rows: list[dict] | str) -> os.PathLike:
    workdir = tmp_path / name / "workdir"
    (workdir / "outputs").mkdir(parents=True)
    text = rows if isinstance(rows, str) else "".join(json.dumps(row) + "\n" for row in rows)
    (workdir / "outputs" / "eval.jsonl").write_text(text)
    return workdir


SPEC = EvaluationSpec(per_example="outputs/eval.jsonl", metric="correct", seeds=3)


def _rows(correct: list[int]) -> list[dict]:
    return [{"id": f"e{i}", "correct": value, "loss": 0.1} for i, value in enumerate(correct)]


def test_kept_evidence_round_trips_and_lists_the_seeds_left_out(tmp_path):
    warnings: list[str] = []
    seeds = [
        (0, "m-1", _workdir(tmp_path, "a", _rows([1, 0, 1, 1])), "Completed"),
        (1, "m-2", _workdir(tmp_path, "b", _rows([1, 1, 1, 0])), "Completed"),
        (2, "m-3", None, "Failed"),
        (3, "m-4", _workdir(tmp_path, "c", '{"id": "e0", "correct": NaN}\n'), "Completed"),
    ]
    run_dir = tmp_path / "run"
    summary = keep_evidence(SPEC, run_dir, seeds, warnings.append)
    assert [entry["seed"] for entry in summary["seeds"]] == [0, 1] and summary["asked"] == 4 and summary["binary"]
    assert [entry["seed"] for entry in summary["failed"]] == [2, 3] and "not a number JSON allows" in summary["failed"][
        1
    ]["evidence"]
    assert (
        len(warnings) == 1 and "seed 3: outputs/eval.jsonl" in warnings[0] and "left out of the verdict" in warnings[0]
    )
    kept = read_set(run_dir, "demo@v2")
    assert kept.metric == "correct" and kept.goal.value == "maximize" and len(kept.seeds) == 2
    assert kept.seeds[1].values.tolist() == [1, 1, 1, 0] and kept.fingerprint == summary["fingerprint"]
    assert set(version_extras(run_dir, summary)) == {
        "evaluation/evaluation.json",
        "evaluation/seed-0.jsonl",
        "evaluation/seed-1.jsonl",
    }
    assert read_set(tmp_path / "elsewhere", "x") is None  # a model from before evidence was kept


def test_a_set_for_another_metric_is_refused(tmp_path):
    keep_evidence(SPEC, tmp_path / "run", [(0, "m-1", _workdir(tmp_path, "a", _rows([1, 0])), "Completed")], print)
    with pytest.raises(EvidenceError, match="scores 'correct', not 'loss'"):
        read_set(tmp_path / "run", "demo@v1", "loss")


@pytest.mark.parametrize(
    "summary, words",
    [
        (
            {"metric": "correct", "goal": "maximize", "seeds": [{"file": "../../etc/passwd"}]},
            "seeds[0].file is not seed-N.jsonl",
        ),
        (
            {"metric": "correct", "goal": "maximize", "seeds": [{"file": "/tmp/seed-0.jsonl"}]},
            "seeds[0].file is not seed-N.jsonl",
        ),
        (
            {"metric": "correct", "goal": "sideways", "seeds": [{"file": "seed-0.jsonl"}]},
            "goal is not maximize or minimize",
        ),
        ({"metric": "correct", "goal": "maximize", "seeds": []}, "no seeds"),
        ({"metric": "correct", "goal": "maximize", "seeds": [{"file": "seed-0.jsonl"}] * 101}, "over the 100"),
        ({"goal": "maximize", "seeds": [{"file": "seed-0.jsonl"}]}, "no metric"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_damaged_summary_is_one_line(tmp_path, summary, words):
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "evaluation.json").write_text(json.dumps(summary))
    with pytest.raises(EvidenceError, match=words.replace("[", r"\[").replace("]", r"\]")):
        read_set(tmp_path, "release v1")


def test_a_summary_that_is_a_link_or_a_fifo_is_refused(tmp_path):
    (tmp_path / "evaluation").mkdir()
    os.symlink("/etc/hostname", tmp_path / "evaluation" / "evaluation.json")
    with pytest.raises(EvidenceError, match="cannot be read"):
        summary_of(tmp_path)
    os.unlink(tmp_path / "evaluation" / "evaluation.json")
    os.mkfifo(tmp_path / "evaluation" / "evaluation.json")
    with pytest.raises(EvidenceError, match="cannot be read"):
        summary_of(tmp_path)


def test_release_assets_have_no_folders_and_map_back():
    assert release_asset("evaluation/seed-12.jsonl") == "evaluation-seed-12.jsonl"
    assert release_asset("evaluation/evaluation.json") == "evaluation.json"
    assert relative_of_asset("evaluation-seed-12.jsonl") == "evaluation/seed-12.jsonl"
    assert relative_of_asset("evaluation.json") == "evaluation/evaluation.json"
    for other in ("evaluation-seed-01.jsonl", "evaluation-../x.jsonl", "metrics.json", "evaluation-seed-1.csv"):
        assert relative_of_asset(other) is None


def test_the_data_fingerprint_covers_a_file_or_a_directorys_regular_files(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("1,2\n")
    first = data_fingerprint(tmp_path / "data")
    os.symlink("/etc/hostname", tmp_path / "data" / "link")
    assert data_fingerprint(tmp_path / "data") == first  # a link is not data
    (tmp_path / "data" / "a.csv").write_text("1,3\n")
    assert data_fingerprint(tmp_path / "data") != first
    assert data_fingerprint(tmp_path / "data" / "a.csv") and data_fingerprint(tmp_path / "nothing") is None


def test_evidence_is_written_normalised(tmp_path):
    from runner.verdict.layout import write_seed

    write_seed(tmp_path / "seed-0.jsonl", Evidence("x", "loss", ("a", "b"), np.array([0.5, 2.0])))
    assert [json.loads(line) for line in (tmp_path / "seed-0.jsonl").read_text().splitlines()] == [
        {"id": "a", "loss": 0.5},
        {"id": "b", "loss": 2.0},
    ]
