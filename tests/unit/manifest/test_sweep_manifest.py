"""The manifest's `sweep:` section: each bad input one line (file:line, field, text), the good forms
load, and what the orchestration reads from it (objective_of, trial_limit)."""

from __future__ import annotations

import json
import re

import pytest
from manifest_errors import error_of

from runner.manifest import load_manifest
from runner.manifest.schema import json_schema
from runner.manifest.sweep import SWEEP_ID_PATTERN, Objective, grid_size, trial_limit
from runner.manifest.sweep_rules import masked_url, objective_of, sweep_warnings

LR = "    --lr: {type: choice, values: [0.1, 0.01]}\n"
PRIMARY = "metrics: {primary: val_loss}\n"  # line 4: sweep: is line 5 below it


def load(project, manifest: str):
    return load_manifest(project(manifest=manifest))


BAD_SWEEPS = [  # (case, manifest after name/source_directory/entry_script, the one line of the error less the path)
    (
        "choice_value_twice",
        PRIMARY + "sweep:\n  search_space:\n    --bs: {type: choice, values: [16, 32, 16, 1.0, 1, true]}\n  limits:"
        " {max_total_trials: 3}\n",
        "7: sweep.search_space.--bs.values[2]: 16 is already value 0 of the choice",
    ),
    (
        "expression_type_did_you_mean",
        PRIMARY + "sweep:\n  search_space:\n    --lr: {type: loguniformm, min_value: -5, max_value: -1}\n",
        (
            "7: sweep.search_space.--lr.type: 'loguniformm' is not one of 'choice', 'randint', 'uniform', 'quniform', "
            "'loguniform', 'qloguniform', 'normal', 'qnormal', 'lognormal', 'qlognormal'; did you mean 'loguniform'?"
        ),
    ),
    (
        "expression_without_type",
        PRIMARY + "sweep:\n  search_space:\n    --lr: {min_value: -5, max_value: -1}\n",
        (
            "7: sweep.search_space.--lr.type: required key is missing; one of 'choice', 'randint', 'uniform',"
            " 'quniform', 'loguniform', 'qloguniform', 'normal', 'qnormal', 'lognormal', 'qlognormal'"
        ),
    ),
    (
        "expression_no_mapping",
        PRIMARY + "sweep:\n  search_space:\n    --lr: 0.1\n",
        (
            "7: sweep.search_space.--lr: must be a mapping with type: one of 'choice', 'randint', 'uniform',"
            " 'quniform', 'loguniform', 'qloguniform', 'normal', 'qnormal', 'lognormal', 'qlognormal'"
        ),
    ),
    (
        "expression_unknown_key",
        PRIMARY
        + "sweep:\n  limits: {max_total_trials: 4}\n  search_space:\n    --lr: {type: normal, mu: 0, sigmaa: 1, sigma:"
        " 1}\n",
        "8: sweep.search_space.--lr.sigmaa: unknown key; did you mean 'sigma'?",
    ),
    (
        "sampling_name_did_you_mean",
        PRIMARY + "sweep:\n  sampling_algorithm: grdi\n  search_space:\n" + LR,
        "6: sweep.sampling_algorithm: 'grdi' is not one of 'random', 'grid' or 'bayesian'; did you mean 'grid'?",
    ),
    (
        "sampling_mapping_did_you_mean",
        PRIMARY + "sweep:\n  sampling_algorithm: {type: bayesain}\n  search_space:\n" + LR,
        (
            "6: sweep.sampling_algorithm.type: 'bayesain' is not one of 'random', 'grid' or 'bayesian'; did you mean"
            " 'bayesian'?"
        ),
    ),
    (
        "sampling_unknown_key",
        PRIMARY + "sweep:\n  sampling_algorithm: {type: grid, sede: 1}\n  search_space:\n" + LR,
        "6: sweep.sampling_algorithm.sede: unknown key; did you mean 'seed'?",
    ),
    (
        "sampling_neither_name_nor_mapping",
        PRIMARY + "sweep:\n  sampling_algorithm: 3\n  search_space:\n" + LR,
        "6: sweep.sampling_algorithm: must be random, grid or bayesian, or a mapping {type: …, seed: …}",
    ),
    (
        "sobol_is_random_only",
        PRIMARY + "sweep:\n  sampling_algorithm: {type: bayesian, rule: sobol}\n  limits: {max_total_trials: 4}\n "
        " search_space:\n" + LR,
        "6: sweep.sampling_algorithm.rule: sobol applies to random sampling, not bayesian",
    ),
    (
        "policy_did_you_mean",
        PRIMARY
        + "sweep:\n  sampling_algorithm: grid\n  early_termination: {type: median_stoping}\n  search_space:\n"
        + LR,
        (
            "7: sweep.early_termination.type: 'median_stoping' is not one of 'bandit', 'median_stopping', "
            "'truncation_selection', 'asha', 'hyperband'; did you mean 'median_stopping'?"
        ),
    ),
    (
        "policy_unknown_key",
        PRIMARY
        + "sweep:\n  sampling_algorithm: grid\n  early_termination: {type: bandit, slack_factr: 0.1}\n  search_space:\n"
        + LR,
        "7: sweep.early_termination.slack_factr: unknown key; did you mean 'slack_factor'?",
    ),
    (
        "bandit_needs_a_slack",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  early_termination: {type: bandit}\n  search_space:\n" + LR,
        "7: sweep.early_termination: bandit needs slack_factor or slack_amount",
    ),
    (
        "bandit_takes_one_slack",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  early_termination:\n    type: bandit\n    slack_factor: 0.1\n"
        "    slack_amount: 0.2\n  search_space:\n" + LR,
        "10: sweep.early_termination.slack_amount: bandit takes slack_factor or slack_amount, not both",
    ),
    (
        "uniform_bounds_in_order",
        PRIMARY + "sweep:\n  limits: {max_total_trials: 4}\n  search_space:\n    --lr: {type: quniform, min_value: 2,"
        " max_value: 1, q: 1}\n",
        "8: sweep.search_space.--lr.min_value: min_value (2) must be less than max_value (1)",
    ),
    (
        "loguniform_exponent_overflows",
        PRIMARY + "sweep:\n  limits: {max_total_trials: 4}\n  search_space:\n    --lr:\n      type: loguniform\n"
        "      min_value: -5\n      max_value: 710\n",
        "11: sweep.search_space.--lr.max_value: 710 is an exponent (loguniform: exp(value)); it must lie within ±700",
    ),
    (
        "grid_takes_choice_and_randint",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --lr:\n      type: uniform\n"
        "      min_value: 0\n      max_value: 1\n",
        "9: sweep.search_space.--lr.type: grid sampling takes choice and randint expressions only; --lr is uniform",
    ),
    (
        "key_is_no_flag",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --lr=0.1: {type: randint, upper: 3}\n",
        "8: sweep.search_space.--lr=0.1: '--lr=0.1' is not a flag (non-empty, no whitespace or '=')",
    ),
    (
        "key_is_empty",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  search_space:\n    '': {type: randint, upper: 3}\n",
        "8: sweep.search_space.'': '' is not a flag (non-empty, no whitespace or '=')",
    ),
    (
        "input_reference_is_not_sampled",
        PRIMARY + "inputs:\n  mnist: {source: src}\nscript_params:\n  --data: {input: mnist}\n"
        "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --data: {type: choice, values: [a, b]}\n",
        (
            "12: sweep.search_space.--data: script_params.--data is {input: …}, a path tftrain passes; it cannot be"
            " sampled"
        ),
    ),
    (
        "resume_reference_is_not_sampled",
        PRIMARY + "resume_from: runs/1\nscript_params:\n  --ckpt: {resume_from: true}\n"
        "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --ckpt: {type: choice, values: [a, b]}\n",
        (
            "11: sweep.search_space.--ckpt: script_params.--ckpt is {resume_from: true}, a path tftrain passes; it"
            " cannot be sampled"
        ),
    ),
    (
        "an_objective_is_needed",
        "sweep:\n  sampling_algorithm: grid\n  search_space:\n" + LR,
        "4: sweep: the sweep has no objective: set sweep.objective.primary_metric (or metrics.primary)",
    ),
    (
        "objective_goal",
        "sweep:\n  sampling_algorithm: grid\n  objective: {primary_metric: acc, goal: maximise}\n  search_space:\n"
        + LR,
        "6: sweep.objective.goal: 'maximise' is not one of 'maximize' or 'minimize'; did you mean 'maximize'?",
    ),
    (
        "max_total_trials_required_unless_grid",
        PRIMARY + "sweep:\n  search_space:\n" + LR,
        "5: sweep.limits.max_total_trials: required for random sampling (only a grid has a size)",
    ),
    (
        "a_huge_grid_needs_max_total_trials",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --a: {type: randint, upper: 1000}\n"
        "    --b: {type: randint, upper: 1000}\n",
        "5: sweep.limits.max_total_trials: the grid has 1000000 points; set max_total_trials (at most 100000)",
    ),
    (
        "storage_scheme",
        PRIMARY
        + "sweep:\n  sampling_algorithm: grid\n  storage: mysql://me:hunter2@db.example/optuna\n  search_space:\n"
        + LR,
        (
            "7: sweep.storage: 'mysql://me:***@db.example/optuna' is not sqlite:///PATH, postgresql://… or"
            " postgresql+psycopg://…"
        ),
    ),
    (
        "storage_sqlite_needs_a_path",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  storage: 'sqlite://'\n  search_space:\n" + LR,
        "7: sweep.storage: 'sqlite://': write sqlite:///PATH (a file the trials share)",
    ),
    (
        "warm_start_takes_sweep_ids",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  warm_start: [demo-sweep-1, demo]\n  search_space:\n" + LR,
        "7: sweep.warm_start[1]: 'demo' is not a sweep id (NAME-sweep-N)",
    ),
    (
        "search_space_required",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n",
        "5: sweep.search_space: required key is missing",
    ),
    (
        "max_cost_without_prices",
        PRIMARY + "sweep:\n  search_space:\n" + LR + "  limits: {max_total_trials: 4, max_cost: 0.5}\n",
        (
            "8: sweep.limits.max_cost: a cost budget needs prices: set compute.cost (or, with compute.target: pool,"
            " cost: in the pool file)"
        ),
    ),
    (
        "max_cost_without_prices_on_docker",
        PRIMARY
        + "compute: {target: docker}\nsweep:\n  search_space:\n"
        + LR
        + "  limits: {max_total_trials: 4, max_cost: 0.5}\n",
        (
            "9: sweep.limits.max_cost: a cost budget needs prices: set compute.cost (or, with compute.target: pool,"
            " cost: in the pool file)"
        ),
    ),
    (
        "search_space_not_empty",
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  search_space: {}\n",
        "7: sweep.search_space: Dictionary should have at least 1 item after validation, not 0",
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), [pytest.param(m, e, id=case) for case, m, e in BAD_SWEEPS])
def test_a_bad_sweep_is_one_line_naming_line_and_field(project, manifest, expected):
    assert error_of(project, manifest) == expected


def test_a_cost_budget_with_prices_or_a_pool_loads(project):
    budget = "sweep:\n  search_space:\n" + LR + "  limits: {max_total_trials: 4, max_cost: 0.5}\n"
    priced = load(project, PRIMARY + "compute: {cost: {cpu_hour: 1.0}}\n" + budget)
    assert priced.manifest.sweep.limits.max_cost == 0.5
    pooled = load(
        project, PRIMARY + "compute: {target: pool}\n" + budget
    )  # the pool file's cost: checked when the sweep starts
    assert pooled.manifest.compute.target == "pool"
    gpu_hours = load(
        project, PRIMARY + "sweep:\n  search_space:\n" + LR + "  limits: {max_total_trials: 4, max_gpu_hours: 2}\n"
    )
    assert gpu_hours.manifest.sweep.limits.max_gpu_hours == 2  # GPU-hours need no prices


def test_a_storage_password_is_never_echoed(project):
    message = error_of(
        project,
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  storage: 'mysql://me:p/a#ss@db/x'\n  search_space:\n" + LR,
    )
    assert "p/a#ss" not in message and "me:***@db/x" in message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:secret@db:5432/optuna", "postgresql://me:***@db:5432/optuna"),
        ("postgresql://me@db/optuna", "postgresql://me@db/optuna"),
        ("sqlite:///tmp/study.db", "sqlite:///tmp/study.db"),
        ("me:secret@db", "***@db"),
    ],
)
def test_masked_url(url, shown):
    assert masked_url(url) == shown


EXPRESSIONS = [
    "{type: choice, values: [1, 2.5, adam, true]}",
    "{type: randint, upper: 10}",
    "{type: uniform, min_value: 0, max_value: 1}",
    "{type: quniform, min_value: 0, max_value: 10, q: 2}",
    "{type: loguniform, min_value: -700, max_value: 700}",
    "{type: qloguniform, min_value: -5, max_value: 0, q: 0.01}",
    "{type: normal, mu: 0, sigma: 1}",
    "{type: qnormal, mu: 0, sigma: 1, q: 0.5}",
    "{type: lognormal, mu: 0, sigma: 1}",
    "{type: qlognormal, mu: 0, sigma: 1, q: 0.5}",
]


@pytest.mark.parametrize("expression", EXPRESSIONS)
@pytest.mark.parametrize(
    "sampling", ["random", "bayesian", "{type: random, seed: 7, rule: sobol}", "{type: bayesian, seed: 0}"]
)
def test_every_expression_loads(project, expression, sampling):
    loaded = load(
        project,
        PRIMARY + f"sweep:\n  sampling_algorithm: {sampling}\n  limits: {{max_total_trials: 8}}\n"
        f"  search_space:\n    --x: {expression}\n",
    )
    assert loaded.manifest.sweep.search_space["--x"].type == expression.split(",")[0].split()[-1]


@pytest.mark.parametrize(
    "policy",
    [
        "{type: bandit, slack_factor: 0.1, evaluation_interval: 2, delay_evaluation: 5}",
        "{type: bandit, slack_amount: 0.2}",
        "{type: median_stopping}",
        "{type: truncation_selection, truncation_percentage: 20, exclude_finished_jobs: true}",
    ],
)
def test_every_policy_loads(project, policy):
    loaded = load(
        project, PRIMARY + f"sweep:\n  sampling_algorithm: grid\n  early_termination: {policy}\n  search_space:\n" + LR
    )
    assert loaded.manifest.sweep.early_termination.type == policy.split(",")[0].split()[-1].rstrip("}")


def test_a_full_sweep_loads(project):
    loaded = load(
        project,
        "resume_from: runs/1\ninputs:\n  mnist: {source: src}\nscript_params:\n  --data: {input: mnist}\n  --ckpt:"
        " {resume_from: true}\n  --lr: 0.1\ndistributed_training: {backend: multi_worker_mirrored, worker_count:"
        " 2}\nsweep:\n  sampling_algorithm: {type: bayesian, seed: 1}\n  search_space:\n    --lr: {type: loguniform,"
        " min_value: -9, max_value: -1}\n    --batch: {type: choice, values: [32, 64]}\n  objective: {primary_metric:"
        " accuracy, goal: maximize}\n  early_termination: {type: bandit, slack_factor: 0.1}\n  limits:"
        " {max_total_trials: 20, max_concurrent_trials: 4, timeout: 3600, trial_timeout: 600}\n  storage:"
        " postgresql+psycopg://tftrain:secret@db.example:5432/optuna\n  warm_start: [demo-sweep-1,"
        " other.model-sweep-12]\n",
    )
    sweep = loaded.manifest.sweep
    assert sweep.sampling.seed == 1 and trial_limit(sweep) == 20
    assert objective_of(loaded.manifest) == Objective(primary_metric="accuracy", goal="maximize")
    assert loaded.warnings == ()


@pytest.mark.parametrize(
    ("metrics", "objective"),
    [
        ("metrics: {primary: val_loss}\n", Objective(primary_metric="val_loss", goal="minimize")),
        ("metrics: {primary: val_accuracy}\n", Objective(primary_metric="val_accuracy", goal="maximize")),
        ("metrics: {primary: val_loss, goal: maximize}\n", Objective(primary_metric="val_loss", goal="maximize")),
    ],
)
def test_the_objective_defaults_to_the_primary_metric(project, metrics, objective):
    loaded = load(project, metrics + "sweep:\n  sampling_algorithm: grid\n  search_space:\n" + LR)
    assert objective_of(loaded.manifest) == objective


def test_sweep_objective_wins_over_metrics(project):
    loaded = load(
        project,
        PRIMARY
        + "sweep:\n  sampling_algorithm: grid\n  objective: {primary_metric: acc, goal: maximize}\n  search_space:\n"
        + LR,
    )
    assert objective_of(loaded.manifest) == Objective(primary_metric="acc", goal="maximize")


def test_trial_limit_of_a_grid_is_its_size(project):
    loaded = load(
        project,
        PRIMARY
        + "sweep:\n  sampling_algorithm: grid\n  search_space:\n"
        + LR
        + "    --units: {type: randint, upper: 3}\n    --opt: {type: choice, values: [adam, sgd, rmsprop]}\n",
    )
    assert grid_size(loaded.manifest.sweep) == 2 * 3 * 3
    assert trial_limit(loaded.manifest.sweep) == 18


def test_a_grid_may_run_fewer_trials(project):
    loaded = load(
        project, PRIMARY + "sweep:\n  sampling_algorithm: grid\n  limits: {max_total_trials: 1}\n  search_space:\n" + LR
    )
    assert trial_limit(loaded.manifest.sweep) == 1
    assert sweep_warnings(loaded.manifest) == []


def test_trial_limit_of_random_sampling(project):
    loaded = load(project, PRIMARY + "sweep:\n  limits: {max_total_trials: 50}\n  search_space:\n" + LR)
    assert trial_limit(loaded.manifest.sweep) == 50


def test_counts_azure_caps_are_warnings(project):
    """Azure runs no more trials than the grid has, and no more at once than in all: allowed, said."""
    loaded = load(
        project,
        PRIMARY + "sweep:\n  sampling_algorithm: grid\n  limits: {max_total_trials: 5, max_concurrent_trials: 8}\n "
        " search_space:\n" + LR,
    )
    assert sweep_warnings(loaded.manifest) == [
        (("sweep", "limits", "max_total_trials"), "the grid has 2 points; no more trials than that run"),
        (("sweep", "limits", "max_concurrent_trials"), "8 exceeds the 2 trials of the sweep; at most 2 run at once"),
    ]


def test_more_concurrent_than_total_trials_is_a_warning(project):
    loaded = load(
        project, PRIMARY + "sweep:\n  limits: {max_total_trials: 3, max_concurrent_trials: 4}\n  search_space:\n" + LR
    )
    assert sweep_warnings(loaded.manifest) == [
        (("sweep", "limits", "max_concurrent_trials"), "4 exceeds the 3 trials of the sweep; at most 3 run at once")
    ]


def test_a_manifest_without_sweep_is_unchanged(project):
    loaded = load(project, "script_params:\n  --epochs: 3\n")
    assert loaded.manifest.sweep is None and sweep_warnings(loaded.manifest) == []


@pytest.mark.parametrize(
    ("text", "matches"),
    [("demo-sweep-1", True), ("a.b_c-sweep-204", True), ("demo", False), ("-sweep-1", False), ("demo-sweep-x", False)],
)
def test_sweep_id_pattern(text, matches):
    assert bool(re.fullmatch(SWEEP_ID_PATTERN, text)) is matches


def test_schema_has_the_sweep_section():
    schema = json.loads(json_schema())
    assert schema["properties"]["sweep"]["anyOf"][0] == {"$ref": "#/$defs/SweepSpec"}
    sweep = schema["$defs"]["SweepSpec"]
    assert {
        "sampling_algorithm",
        "search_space",
        "objective",
        "early_termination",
        "limits",
        "storage",
        "warm_start",
    } <= set(sweep["properties"])
    assert set(sweep["properties"]["search_space"]["additionalProperties"]["discriminator"]["mapping"]) == {
        "choice",
        "randint",
        "uniform",
        "quniform",
        "loguniform",
        "qloguniform",
        "normal",
        "qnormal",
        "lognormal",
        "qlognormal",
    }


def test_the_sweep_names_the_messages_use_are_the_models_tags():
    """runner.manifest.fields names them for validate.py without importing the sweep's models."""
    from typing import get_args

    from runner.manifest.fields import EXPRESSIONS, POLICIES
    from runner.manifest.sweep import EarlyTermination, Expression

    def tags(union) -> tuple[str, ...]:
        return tuple(get_args(member.model_fields["type"].annotation)[0] for member in get_args(get_args(union)[0]))

    assert tags(Expression) == EXPRESSIONS
    assert tags(EarlyTermination) == POLICIES


def test_a_manifest_is_validated_with_the_sweep_only_when_it_has_one():
    from runner.manifest import Manifest, manifest_class, stored_manifest
    from runner.manifest.sweep import SweptManifest

    assert manifest_class({"name": "m", "entry_script": "t.py"}) is Manifest
    assert manifest_class({"name": "m", "entry_script": "t.py", "sweep": None}) is Manifest
    assert manifest_class({"name": "m", "entry_script": "t.py", "sweep": {}}) is SweptManifest
    swept = SweptManifest.model_validate(
        {"name": "m", "entry_script": "t.py", "sweep": {"search_space": {"--lr": {"type": "choice", "values": [1]}}}}
    )
    again = stored_manifest(swept.model_dump_json())
    assert type(again) is SweptManifest and again == swept
    plain = stored_manifest(swept.model_copy(update={"sweep": None}).model_dump_json())
    assert type(plain) is Manifest and plain.sweep is None
    for text in ("[1]", "{", "[" * 100_000, '{"name": "m", "entry_script": "t.py", "sweep": 5}'):
        with pytest.raises(ValueError):
            stored_manifest(text)
