"""The `sweep:` section's rules that span several keys (or the rest of the manifest), checked after
each key is valid on its own; like rules.py, each returns (location, message) pairs."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from runner.manifest.document import Location
from runner.manifest.fields import InputRef, ResumeRef
from runner.manifest.model import Manifest, effective_target
from runner.manifest.sweep import MAX_TRIALS, Objective, SweepSpec, grid_size, trial_limit
from runner.shared.catalog import row_of

Problem = tuple[Location, str]
MAX_EXPONENT = 700  # exp(709.8) overflows a float; exp(-745) is 0, whose log Optuna cannot sample
GRID_EXPRESSIONS = ("choice", "randint")
STORAGE_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")
SHOWN_VALUE = 80  # characters of a value quoted in a message


def check_sweep(manifest: Manifest) -> list[Problem]:
    sweep = manifest.sweep
    if sweep is None:
        return []
    return [
        *_bounds(sweep),
        *_choices(sweep),
        *_grid(sweep),
        *_keys(manifest, sweep),
        *_objective(manifest, sweep),
        *_policy(sweep),
        *_limits(sweep),
        *_prices(manifest, sweep),
        *_storage(sweep),
    ]


def sweep_warnings(manifest: Manifest) -> list[Problem]:
    """What Azure ML accepts and quietly caps, said: nobody waits for trials that never run.
    Call it on a manifest that passed check_sweep (load_manifest's warnings)."""
    sweep = manifest.sweep
    if sweep is None or (sweep.limits.max_total_trials is None and sweep.sampling.type != "grid"):
        return []
    warnings: list[Problem] = []
    trials = trial_limit(sweep)  # capped at the grid's size
    if sweep.sampling.type == "grid" and (sweep.limits.max_total_trials or 0) > trials:
        warnings.append(((*_LIMITS, "max_total_trials"), f"the grid has {trials} points; no more trials than that run"))
    concurrent = sweep.limits.max_concurrent_trials
    if concurrent > trials:
        warnings.append(
            (
                (*_LIMITS, "max_concurrent_trials"),
                f"{concurrent} exceeds the {trials} trials of the sweep; at most {trials} run at once",
            )
        )
    return warnings


def objectives_of(manifest: Manifest) -> tuple[Objective, ...]:
    """The sweep's objectives, in the manifest's order: more than one makes a multi-objective sweep
    (its Pareto front); the first is the one trials are ranked by first. Without sweep.objective:
    metrics.primary with its goal (metrics.goal or the name's)."""
    objective = manifest.sweep.objective if manifest.sweep is not None else None
    if isinstance(objective, list):
        return tuple(objective)
    if objective is not None:
        return (objective,)
    primary = manifest.metrics.primary
    if not primary:
        raise ValueError("no objective: set sweep.objective.primary_metric (or metrics.primary)")
    return (Objective(primary_metric=primary, goal=manifest.metrics.goal_for(primary)),)


def objective_of(manifest: Manifest) -> Objective:
    """The sweep's objective: sweep.objective (the first of a list), else metrics.primary's (objectives_of)."""
    return objectives_of(manifest)[0]


_SPACE: Location = ("sweep", "search_space")
_LIMITS: Location = ("sweep", "limits")


def _bounds(sweep: SweepSpec) -> list[Problem]:
    problems: list[Problem] = []
    for key, expression in sweep.search_space.items():
        if expression.type not in ("uniform", "quniform", "loguniform", "qloguniform"):
            continue
        if expression.min_value >= expression.max_value:
            problems.append(
                (
                    (*_SPACE, key, "min_value"),
                    f"min_value ({expression.min_value:g}) must be less than max_value ({expression.max_value:g})",
                )
            )
        if expression.type in ("loguniform", "qloguniform"):
            for bound in ("min_value", "max_value"):
                value = getattr(expression, bound)
                if abs(value) > MAX_EXPONENT:
                    problems.append(
                        (
                            (*_SPACE, key, bound),
                            (
                                f"{value:g} is an exponent ({expression.type}: exp(value)); "
                                f"it must lie within ±{MAX_EXPONENT}"
                            ),
                        )
                    )
    return problems


def _choices(sweep: SweepSpec) -> list[Problem]:
    """A value twice in a choice is a mistake (a grid would run it twice, random would favour it);
    1, 1.0 and true are three values. One pass with a dict of first places (a list's `in` made
    20,000 values take seconds), and one problem per choice, with the count: 20,000 copies of a
    value are one line, not 19,999."""
    problems: list[Problem] = []
    for key, expression in sweep.search_space.items():
        if expression.type != "choice":
            continue
        first: dict[tuple[type, str], int] = {}
        repeats: list[tuple[int, object]] = []
        for index, value in enumerate(expression.values):
            mark = (type(value), repr(value))
            if mark in first:
                repeats.append((index, value))
            else:
                first[mark] = index
        if repeats:
            index, value = repeats[0]
            more = f" ({len(repeats)} values of the choice repeat an earlier one)" if len(repeats) > 1 else ""
            shown = repr(value) if len(repr(value)) <= SHOWN_VALUE else repr(value)[: SHOWN_VALUE - 1] + "…"
            problems.append(
                (
                    (*_SPACE, key, "values", index),
                    f"{shown} is already value {first[(type(value), repr(value))]} of the choice{more}",
                )
            )
    return problems


def _grid(sweep: SweepSpec) -> list[Problem]:
    sampling = sweep.sampling
    problems: list[Problem] = []
    if sampling.rule == "sobol" and sampling.type != "random":
        problems.append(
            (("sweep", "sampling_algorithm", "rule"), f"sobol applies to random sampling, not {sampling.type}")
        )
    if sampling.type != "grid":
        return problems
    for key, expression in sweep.search_space.items():
        if expression.type not in GRID_EXPRESSIONS:
            problems.append(
                (
                    (*_SPACE, key, "type"),
                    f"grid sampling takes choice and randint expressions only; {key} is {expression.type}",
                )
            )
    return problems


def _keys(manifest: Manifest, sweep: SweepSpec) -> list[Problem]:
    """A key is the script_params flag the sampled value is passed as."""
    problems: list[Problem] = []
    for key in sweep.search_space:
        if not key or re.search(r"[\s=]", key):
            problems.append(((*_SPACE, key), f"{key!r} is not a flag (non-empty, no whitespace or '=')"))
            continue
        value = manifest.script_params.get(key)
        if isinstance(value, (InputRef, ResumeRef)):
            form = "{input: …}" if isinstance(value, InputRef) else "{resume_from: true}"
            problems.append(
                ((*_SPACE, key), f"script_params.{key} is {form}, a path tftrain passes; it cannot be sampled")
            )
    return problems


def _objective(manifest: Manifest, sweep: SweepSpec) -> list[Problem]:
    if sweep.objective is None and not manifest.metrics.primary:
        return [(("sweep",), "the sweep has no objective: set sweep.objective.primary_metric (or metrics.primary)")]
    if not isinstance(sweep.objective, list):
        return []
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for index, objective in enumerate(sweep.objective):
        metric = objective.primary_metric
        if metric in first:
            problems.append(
                (("sweep", "objective", index, "primary_metric"), f"{metric!r} is already objective {first[metric]}")
            )
        first.setdefault(metric, index)
    if len(sweep.objective) > 1 and sweep.early_termination is not None:
        problems.append(
            (
                ("sweep", "early_termination"),
                (
                    f"Optuna prunes single-objective sweeps only; this sweep has {len(sweep.objective)} objectives"
                    " (drop early_termination or keep one objective)"
                ),
            )
        )
    return problems


def _policy(sweep: SweepSpec) -> list[Problem]:
    policy = sweep.early_termination
    if (
        policy is not None
        and policy.type == "hyperband"
        and policy.max_resource is not None
        and policy.max_resource < policy.min_resource
    ):
        return [
            (
                ("sweep", "early_termination", "max_resource"),
                f"max_resource ({policy.max_resource}) must be at least min_resource ({policy.min_resource})",
            )
        ]
    if policy is None or policy.type != "bandit":
        return []
    if policy.slack_factor is None and policy.slack_amount is None:
        return [(("sweep", "early_termination"), "bandit needs slack_factor or slack_amount")]
    if policy.slack_factor is not None and policy.slack_amount is not None:
        return [(("sweep", "early_termination", "slack_amount"), "bandit takes slack_factor or slack_amount, not both")]
    return []


def _limits(sweep: SweepSpec) -> list[Problem]:
    if sweep.limits.max_total_trials is not None:
        return []
    if sweep.sampling.type != "grid":
        return [
            ((*_LIMITS, "max_total_trials"), f"required for {sweep.sampling.type} sampling (only a grid has a size)")
        ]
    size = grid_size(sweep)
    if size > MAX_TRIALS:
        return [
            ((*_LIMITS, "max_total_trials"), f"the grid has {size} points; set max_total_trials (at most {MAX_TRIALS})")
        ]
    return []


def _prices(manifest: Manifest, sweep: SweepSpec) -> list[Problem]:
    """A cost budget needs prices: compute.cost, or the pool file's `cost:` (checked when the sweep
    starts, runner.sweep.driver). Without them no trial has a cost, and nothing keeps the budget."""
    if (
        sweep.limits.max_cost is None
        or manifest.compute.cost is not None
        or row_of(effective_target(manifest)).own_prices
    ):
        return []
    return [
        (
            (*_LIMITS, "max_cost"),
            "a cost budget needs prices: set compute.cost (or, with compute.target: pool, cost: in the pool file)",
        )
    ]


def _storage(sweep: SweepSpec) -> list[Problem]:
    url = sweep.storage
    if url is None:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [(("sweep", "storage"), f"{masked_url(url)!r} is not a URL")]
    scheme = parts.scheme.lower()
    if scheme not in STORAGE_SCHEMES:
        return [
            (
                ("sweep", "storage"),
                f"{masked_url(url)!r} is not sqlite:///PATH, postgresql://… or postgresql+psycopg://…",
            )
        ]
    if scheme == "sqlite" and (parts.netloc or parts.path in ("", "/")):
        return [(("sweep", "storage"), f"{masked_url(url)!r}: write sqlite:///PATH (a file the trials share)")]
    return []


def masked_url(url: str) -> str:
    """`url` with the password of its user part replaced by ***: an error message never shows it.
    Split by hand, not by urlsplit, so that a password holding / or # is masked whole."""
    head, separator, rest = url.partition("://")
    user, at, host = rest.rpartition("@") if separator else url.rpartition("@")
    if not at:
        return url
    if not separator:
        return f"***@{host}"
    if ":" not in user:
        return url
    return f"{head}://{user.split(':', 1)[0]}:***@{host}"
