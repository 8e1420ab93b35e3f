"""`evaluation:` in the manifest: its defaults, its limits and its rules, each one line naming the field."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest

SECTION = "evaluation:\n  per_example: outputs/eval.jsonl\n  metric: correct\n"


def test_defaults_work_without_thought(project):
    spec = load_manifest(project(manifest=SECTION)).manifest.evaluation
    assert (spec.seeds, spec.margin, spec.confidence, spec.set_seed, spec.script) == (1, 0.0, 0.95, True, None)
    assert spec.goal_for() == "maximize"


@pytest.mark.parametrize(
    "metric, goal", [("loss", "minimize"), ("error_rate", "minimize"), ("correct", "maximize"), ("top5", "maximize")]
)
def test_the_goal_follows_the_metric_name_unless_given(project, metric, goal):
    spec = load_manifest(project(manifest=SECTION.replace("correct", metric))).manifest.evaluation
    assert spec.goal_for() == goal
    given = load_manifest(
        project(manifest=SECTION.replace("correct", metric) + "  goal: maximize\n")
    ).manifest.evaluation
    assert given.goal_for() == "maximize"


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ("  seeds: 0\n", "evaluation.seeds", "greater than or equal to 1"),
        ("  seeds: 10000\n", "evaluation.seeds", "less than or equal to 100"),
        ("  margin: -0.1\n", "evaluation.margin", "greater than or equal to 0"),
        ("  margin: .inf\n", "evaluation.margin", "finite"),
        ("  confidence: 1\n", "evaluation.confidence", "less than 1"),
        ("  confidence: 0.2\n", "evaluation.confidence", "greater than or equal to 0.5"),
        ("  goal: up\n", "evaluation.goal", "maximize"),
        ("  seeds: '3'\n", "evaluation.seeds", "integer"),
        ("  max_concurrent: 0\n", "evaluation.max_concurrent", "greater than or equal to 1"),
        ("  script: ../eval.py\n", "evaluation.script", "relative path that stays inside"),
        ("  script: missing.py\n", "evaluation.script", "'missing.py' not found in source_directory"),
        ("  colour: red\n", "evaluation.colour", "unknown key; allowed keys: confidence"),
    ],
)
def test_bad_values_are_one_line_naming_the_field(project, extra, field, words):
    with pytest.raises(ManifestError) as caught:
        load_manifest(project(manifest=SECTION + extra))
    assert field in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(
    "path, words",
    [
        ("eval.jsonl", "must stay inside outputs_dir 'outputs'"),
        ("outputs/eval.txt", "must be a .jsonl, .csv, .npz file"),
        ("/tmp/eval.jsonl", "relative path"),
    ],
)
def test_per_example_is_a_kept_file_of_a_known_format(project, path, words):
    with pytest.raises(ManifestError) as caught:
        load_manifest(project(manifest=SECTION.replace("outputs/eval.jsonl", path)))
    assert "evaluation.per_example" in str(caught.value) and words in str(caught.value)


def test_the_seed_variable_is_tftrains_with_an_evaluation(project):
    with pytest.raises(ManifestError) as caught:
        load_manifest(project(manifest=SECTION + "environment_variables:\n  TFTRAIN_SEED: '7'\n"))
    assert "environment_variables.TFTRAIN_SEED" in str(caught.value) and "evaluation" in str(caught.value)
    assert load_manifest(project(manifest="environment_variables:\n  TFTRAIN_SEED: '7'\n")).manifest.evaluation is None


def test_the_script_must_be_a_file_of_the_source_directory(project):
    path = project(manifest=SECTION + "  script: eval.py\n")
    (path.parent / "src" / "eval.py").write_text("print('eval')\n")
    assert load_manifest(path).manifest.evaluation.script == "eval.py"


def test_the_plan_says_the_seeds_and_shows_seed_zeros_environment(project, cli):
    result = cli("plan", "-f", str(project(manifest=SECTION + "  seeds: 3\n")))
    assert result.returncode == 0, result.stderr
    assert (
        "evaluation:  3 runs of this plan (TFTRAIN_SEED 0…2, the frameworks seeded from it; seed 0's shown)"
        in result.stdout
    )
    assert "env TFTRAIN_SEED=0" in result.stdout and "runner/compat/startup" in result.stdout
    unseeded = cli("plan", "-f", str(project(manifest=SECTION + "  set_seed: false\n")))
    assert "evaluation.set_seed: false" in unseeded.stdout and "runner/compat/startup" not in unseeded.stdout
