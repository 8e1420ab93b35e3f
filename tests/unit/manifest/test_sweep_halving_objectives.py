"""The manifest's `sweep:` beyond HyperDrive: `early_termination: {type: asha | hyperband}` and a list
of objectives (a multi-objective sweep): the good forms load, each bad one is one line naming its
line and field, and pruning a multi-objective sweep is refused."""

from __future__ import annotations

import pytest
from manifest_errors import error_of

from runner.manifest import load_manifest
from runner.manifest.sweep import Asha, Hyperband, Objective
from runner.manifest.sweep_rules import objective_of, objectives_of

LR = "    --lr: {type: choice, values: [0.1, 0.01]}\n"
PRIMARY = "metrics: {primary: val_loss}\n"  # line 4: sweep: is line 5 below it
TWO = "  objective: [{primary_metric: acc, goal: maximize}, {primary_metric: latency_ms, goal: minimize}]\n"


def load(project, manifest: str):
    return load_manifest(project(manifest=manifest))


def sweep(*lines: str) -> str:
    return PRIMARY + "sweep:\n  sampling_algorithm: grid\n" + "".join(lines) + "  search_space:\n" + LR


def test_asha_and_hyperband_load_with_their_defaults(project):
    asha = load(project, sweep("  early_termination: {type: asha}\n")).manifest.sweep.early_termination
    assert asha == Asha(type="asha", min_resource=1, reduction_factor=3)
    band = load(
        project,
        sweep("  early_termination: {type: hyperband, min_resource: 2, max_resource: 18, reduction_factor: 3}\n"),
    )
    assert band.manifest.sweep.early_termination == Hyperband(
        type="hyperband", min_resource=2, max_resource=18, reduction_factor=3
    )
    auto = load(project, sweep("  early_termination: {type: hyperband}\n")).manifest.sweep.early_termination
    assert auto.max_resource is None  # Optuna's "auto": the first finished trial's count of reports


def test_a_list_of_objectives_is_a_multi_objective_sweep(project):
    manifest = load(project, sweep(TWO)).manifest
    assert objectives_of(manifest) == (
        Objective(primary_metric="acc", goal="maximize"),
        Objective(primary_metric="latency_ms", goal="minimize"),
    )
    assert objective_of(manifest) == Objective(
        primary_metric="acc", goal="maximize"
    )  # the first: what ranks trials first


def test_the_mapping_form_stays_one_objective(project):
    manifest = load(project, sweep("  objective: {primary_metric: acc, goal: maximize}\n")).manifest
    assert objectives_of(manifest) == (Objective(primary_metric="acc", goal="maximize"),)
    assert objectives_of(load(project, sweep()).manifest) == (Objective(primary_metric="val_loss", goal="minimize"),)


def test_a_list_of_one_objective_may_be_pruned(project):
    manifest = load(
        project, sweep("  objective: [{primary_metric: acc, goal: maximize}]\n  early_termination: {type: asha}\n")
    ).manifest
    assert objectives_of(manifest) == (Objective(primary_metric="acc", goal="maximize"),)


BAD = [
    (
        "policy_did_you_mean_hyperband",
        sweep("  early_termination: {type: hyperbnd}\n"),
        (
            "7: sweep.early_termination.type: 'hyperbnd' is not one of 'bandit', 'median_stopping',"
            " 'truncation_selection', 'asha', 'hyperband'; did you mean 'hyperband'?"
        ),
    ),
    (
        "policy_did_you_mean_asha",
        sweep("  early_termination: {type: ashaa}\n"),
        (
            "7: sweep.early_termination.type: 'ashaa' is not one of 'bandit', 'median_stopping',"
            " 'truncation_selection', 'asha', 'hyperband'; did you mean 'asha'?"
        ),
    ),
    (
        "key_did_you_mean",
        sweep("  early_termination: {type: asha, reduction_facter: 2}\n"),
        "7: sweep.early_termination.reduction_facter: unknown key; did you mean 'reduction_factor'?",
    ),
    (
        "asha_takes_no_max_resource",
        sweep("  early_termination: {type: asha, max_resource: 9}\n"),
        "7: sweep.early_termination.max_resource: unknown key; did you mean 'min_resource'?",
    ),
    (
        "reduction_factor_at_least_2",
        sweep("  early_termination: {type: hyperband, reduction_factor: 1}\n"),
        "7: sweep.early_termination.reduction_factor: Input should be greater than or equal to 2",
    ),
    (
        "min_resource_at_least_1",
        sweep("  early_termination: {type: asha, min_resource: 0}\n"),
        "7: sweep.early_termination.min_resource: Input should be greater than or equal to 1",
    ),
    (
        "max_below_min",
        sweep("  early_termination: {type: hyperband, min_resource: 9, max_resource: 3}\n"),
        "7: sweep.early_termination.max_resource: max_resource (3) must be at least min_resource (9)",
    ),
    (
        "pruning_a_multi_objective_sweep",
        sweep(TWO, "  early_termination: {type: hyperband}\n"),
        (
            "8: sweep.early_termination: Optuna prunes single-objective sweeps only; this sweep has 2 objectives "
            "(drop early_termination or keep one objective)"
        ),
    ),
    (
        "pruning_a_multi_objective_sweep_bandit",
        sweep(TWO, "  early_termination: {type: bandit, slack_factor: 0.1}\n"),
        (
            "8: sweep.early_termination: Optuna prunes single-objective sweeps only; this sweep has 2 objectives "
            "(drop early_termination or keep one objective)"
        ),
    ),
    (
        "an_objective_twice",
        sweep("  objective: [{primary_metric: acc, goal: maximize}, {primary_metric: acc, goal: minimize}]\n"),
        "7: sweep.objective[1].primary_metric: 'acc' is already objective 0",
    ),
    (
        "an_empty_list",
        sweep("  objective: []\n"),
        "7: sweep.objective: List should have at least 1 item after validation, not 0",
    ),
    (
        "neither_form",
        sweep("  objective: val_accuracy\n"),
        (
            "7: sweep.objective: must be a mapping {primary_metric: …, goal: …}, or a list of them (a multi-objective"
            " sweep)"
        ),
    ),
    (
        "a_goal_in_the_list",
        sweep("  objective: [{primary_metric: acc, goal: maximize}, {primary_metric: latency_ms, goal: minimise}]\n"),
        "7: sweep.objective[1].goal: 'minimise' is not one of 'maximize' or 'minimize'; did you mean 'minimize'?",
    ),
    (
        "too_many_objectives",
        sweep("  objective: [" + ", ".join(f"{{primary_metric: m{n}, goal: maximize}}" for n in range(17)) + "]\n"),
        "7: sweep.objective: List should have at most 16 items after validation, not 17",
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), [pytest.param(m, e, id=case) for case, m, e in BAD])
def test_a_bad_policy_or_objective_is_one_line_naming_line_and_field(project, manifest, expected):
    assert error_of(project, manifest) == expected
