"""A verdict's sides from their references: runs, registered versions (a verified copy, removed
after), unknown references in one line; when a baseline must be re-evaluated, and with what."""

from __future__ import annotations

import json
import sys

import pytest
import scipy.special  # noqa: F401  at collection: numpy.testing, which it imports, runs lscpu (a process) once
from builders import Notes
from verdicts import finished_run, scores

from runner.errors import NotFoundError, RegistryError
from runner.verdict.reevaluate import interpreter_of, kept_name, why_reevaluate
from runner.verdict.refs import side_of


def test_a_run_is_its_kept_evidence_its_model_and_its_point_value(home):
    run_id = finished_run(home, seeds=scores(0.9, 200, 3, 1), primary=0.91)
    with side_of("latest", home, Notes()) as side:
        assert side.label == run_id == "demo-1" and len(side.evidence.seeds) == 3 and side.evidence.metric == "correct"
        assert side.model == home / "runs" / run_id / "workdir" / "outputs" / "model"
        assert (side.point.metric, side.point.value, side.point.goal) == ("accuracy", 0.91, "maximize")
        assert side.run_dir == home / "runs" / run_id and side.manifest["name"] == "demo"


def test_a_version_is_read_from_a_verified_copy_that_is_removed_after(home):
    finished_run(home, seeds=scores(0.9, 200, 2, 1), primary=0.9, register=True)
    with side_of("demo@latest", home, Notes()) as side:
        copy = side.model.parent
        assert side.label == "demo@v1" and len(side.evidence.seeds) == 2
        assert (copy / "evaluation" / "seed-1.jsonl").is_file() and (side.model / "saved_model.pb").is_file()
        assert side.run_dir == home / "runs" / "demo-1" and side.point.value == 0.9
    assert not copy.exists()
    with side_of("demo-1", home, Notes()) as side:  # a run that registered its model: the verified copy is re-evaluated
        assert side.model.name == "model" and side.model.parent.name == "version" and side.evidence is not None


def test_a_versions_evidence_changed_after_registration_is_refused_as_damaged(home):
    finished_run(home, seeds=scores(0.9, 50, 2, 1), register=True)
    seed = home / "models" / "demo" / "v1" / "evaluation" / "seed-0.jsonl"
    seed.write_text(seed.read_text().replace('"correct": 0.0', '"correct": 1.0'))
    with pytest.raises(
        RegistryError, match=r"^model demo@v1 is damaged: evaluation/seed-0.jsonl is not what version.json says"
    ):
        with side_of("demo@v1", home, Notes()):
            pass


@pytest.mark.parametrize(
    "ref, words",
    [("nosuch-7", "'nosuch-7' is not a run here: use a run id"), ("demo@v9", "demo@v9"), ("ghost@latest", "ghost")],
)
def test_a_reference_that_names_nothing_is_one_line(home, ref, words):
    finished_run(home, seeds=scores(0.9, 20, 1, 1), register=True)
    with pytest.raises(NotFoundError, match=words) as caught:
        with side_of(ref, home, Notes()):
            pass
    assert "\n" not in str(caught.value)


def test_evidence_kept_for_another_metric_is_missing_and_says_so(home):
    finished_run(home, seeds=scores(0.9, 20, 1, 1))
    with side_of("demo-1", home, Notes(), metric="loss") as side:
        assert side.evidence is None and side.missing == "demo-1's evidence scores 'correct', not 'loss'"


def test_a_baseline_is_re_evaluated_when_it_kept_none_or_scored_another_set(home):
    finished_run(home, seeds=scores(0.9, 30, 2, 1), data_fingerprint="a" * 64)
    finished_run(home, seeds=scores(0.9, 30, 1, 2), data_fingerprint="a" * 64)
    finished_run(home, seeds=scores(0.9, 30, 1, 3, prefix="y"))
    finished_run(home, seeds=scores(0.9, 30, 1, 4), data_fingerprint="b" * 64)
    finished_run(home)
    with side_of("demo-1", home, Notes()) as candidate:
        reasons = {}
        for ref in ("demo-2", "demo-3", "demo-4", "demo-5"):
            with side_of(ref, home, Notes()) as baseline:
                reasons[ref] = why_reevaluate(candidate.evidence, baseline)
    assert reasons == {
        "demo-2": None,
        "demo-3": "demo-3 scored another evaluation set (the examples' ids differ)",
        "demo-4": "demo-4 was evaluated on other data (evaluation.data's fingerprint differs)",
        "demo-5": "demo-5 kept no per-example evidence",
    }


@pytest.mark.parametrize(
    "environment, words",
    [
        (
            {"python": "/venv/bin/python", "image": "tftrain/demo:abc"},
            "trained in the image tftrain/demo:abc: re-evaluating a baseline in an image is not supported yet",
        ),
        (
            {"python": "/no/such/python", "image": None},
            "the run's interpreter '/no/such/python' is not a file on this machine",
        ),
        ({"python": "python3", "image": None}, "the run's interpreter 'python3' is not a file on this machine"),
    ],
)
def test_a_run_whose_interpreter_is_not_here_says_why(tmp_path, environment, words):
    (tmp_path / "manifest.lock.yml").write_text(json.dumps({"environment": environment}))
    found = interpreter_of(tmp_path)
    assert found.python is None and words in found.problem


def test_a_local_runs_interpreter_is_used(tmp_path):
    (tmp_path / "manifest.lock.yml").write_text(json.dumps({"environment": {"python": sys.executable, "image": None}}))
    assert interpreter_of(tmp_path).python == sys.executable
    assert "cannot be read" in interpreter_of(tmp_path / "gone").problem


def test_a_label_is_a_safe_file_name():
    assert kept_name("digits@v4") == "baseline-digits-v4.jsonl"
    assert kept_name("../../etc/passwd") == "baseline-etc-passwd.jsonl"
    assert kept_name("@@") == "baseline-model.jsonl"
