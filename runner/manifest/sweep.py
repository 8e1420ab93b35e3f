"""The manifest's `sweep:` section: a hyperparameter sweep in Azure ML v2 sweep-job terms.

`search_space` keys are script_params flags; each trial is a full run with the sampled values in
its script_params. Expressions follow Azure's: loguniform's bounds are exponents (the value is
exp(uniform(min, max))), q-expressions round to a multiple of q, randint(upper) is 0 … upper-1.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag

from runner.manifest.fields import MAX_SECONDS, SWEEP_ID_PATTERN, Model, Scalar, empty_list
from runner.manifest.model import Manifest

MAX_TRIALS = 100_000
MAX_OBJECTIVES = 16

Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Choice(Model):
    type: Literal["choice"]
    values: list[Scalar] = Field(min_length=1)


class RandInt(Model):
    type: Literal["randint"]
    upper: int = Field(ge=1, le=1 << 53, description="An integer from 0 to upper - 1")


class Uniform(Model):
    type: Literal["uniform"]
    min_value: Finite
    max_value: Finite


class QUniform(Uniform):
    type: Literal["quniform"]
    q: Positive


class LogUniform(Model):
    type: Literal["loguniform"]
    min_value: Finite = Field(description="Exponent: the value is exp(uniform(min_value, max_value))")
    max_value: Finite


class QLogUniform(LogUniform):
    type: Literal["qloguniform"]
    q: Positive


class Normal(Model):
    type: Literal["normal"]
    mu: Finite
    sigma: Positive


class QNormal(Normal):
    type: Literal["qnormal"]
    q: Positive


class LogNormal(Normal):
    type: Literal["lognormal"]


class QLogNormal(Normal):
    type: Literal["qlognormal"]
    q: Positive


Expression = Annotated[
    Union[Choice, RandInt, Uniform, QUniform, LogUniform, QLogUniform, Normal, QNormal, LogNormal, QLogNormal],
    Field(discriminator="type"),
]


class Sampling(Model):
    type: Literal["random", "grid", "bayesian"]
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    rule: Literal["random", "sobol"] = Field(
        default="random", description="random sampling only: pseudo-random or a Sobol sequence"
    )


class Objective(Model):
    primary_metric: str = Field(min_length=1)
    goal: Literal["maximize", "minimize"]


class _Policy(Model):
    evaluation_interval: int = Field(
        default=1, ge=1, description="Apply the policy every N reports of the primary metric"
    )
    delay_evaluation: int = Field(default=0, ge=0, description="Apply it first after N reports")


class Bandit(_Policy):
    type: Literal["bandit"]
    slack_factor: Positive | None = Field(
        default=None, description="Stop a trial worse than best / (1 + slack_factor) (maximize)"
    )
    slack_amount: Positive | None = Field(
        default=None, description="Stop a trial worse than best - slack_amount (maximize)"
    )


class MedianStopping(_Policy):
    type: Literal["median_stopping"]


class TruncationSelection(_Policy):
    type: Literal["truncation_selection"]
    truncation_percentage: int = Field(
        ge=1, le=99, description="Stop this share of the lowest-performing trials at each evaluation"
    )
    exclude_finished_jobs: bool = False


class _Halving(Model):
    """Successive halving (Optuna's pruners): the resource is the count of the primary metric's
    reports (step 1, 2, 3 …), the same steps the HyperDrive policies count."""

    min_resource: int = Field(
        default=1, ge=1, le=1 << 31, description="Reports every trial makes before the first rung"
    )
    reduction_factor: int = Field(
        default=3, ge=2, le=1024, description="1 in reduction_factor trials goes on at each rung"
    )


class Asha(_Halving):
    type: Literal["asha"]


class Hyperband(_Halving):
    type: Literal["hyperband"]
    max_resource: int | None = Field(
        default=None,
        ge=1,
        le=1 << 31,
        description="Reports of a trial that runs to its end; default: the first finished trial's",
    )


EarlyTermination = Annotated[
    Union[Bandit, MedianStopping, TruncationSelection, Asha, Hyperband], Field(discriminator="type")
]


class Limits(Model):
    max_total_trials: int | None = Field(
        default=None, ge=1, le=MAX_TRIALS, description="Default: the grid's size (grid); required otherwise"
    )
    max_concurrent_trials: int = Field(default=1, ge=1, le=1024)
    timeout: int | None = Field(default=None, ge=1, le=MAX_SECONDS, description="Seconds for the whole sweep")
    trial_timeout: int | None = Field(
        default=None, ge=1, le=MAX_SECONDS, description="Seconds for one trial (its max_run_duration_seconds)"
    )
    max_gpu_hours: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        allow_inf_nan=False,
        description=(
            "No trial starts that would take the sweep past this many allocated GPU-hours (estimated from the finished"
            " trials' mean)"
        ),
    )
    max_cost: float | None = Field(
        default=None,
        gt=0,
        le=1e12,
        allow_inf_nan=False,
        description=(
            "No trial starts that would take the sweep past this cost (needs compute.cost or the pool file's cost)"
        ),
    )


def _written_as(value: Any) -> str | None:
    """A name (`grid`) or a mapping (`{type: grid, seed: 1}`): one error for the form written, not one per form."""
    if isinstance(value, str):
        return "str"
    return "mapping" if isinstance(value, (dict, Sampling)) else None


SamplingAlgorithm = Annotated[
    Union[Annotated[Literal["random", "grid", "bayesian"], Tag("str")], Annotated[Sampling, Tag("mapping")]],
    Discriminator(
        _written_as,
        custom_error_type="value_form",
        custom_error_message="must be random, grid or bayesian, or a mapping {type: …, seed: …}",
    ),
]


def _objective_form(value: Any) -> str | None:
    if isinstance(value, list):
        return "list"
    return "mapping" if isinstance(value, (dict, Objective)) else None


Objectives = Annotated[
    Union[
        Annotated[Objective, Tag("mapping")],
        Annotated[list[Objective], Field(min_length=1, max_length=MAX_OBJECTIVES), Tag("list")],
    ],
    Discriminator(
        _objective_form,
        custom_error_type="value_form",
        custom_error_message=(
            "must be a mapping {primary_metric: …, goal: …}, or a list of them (a multi-objective sweep)"
        ),
    ),
]


class SweepSpec(Model):
    sampling_algorithm: SamplingAlgorithm = "random"
    search_space: dict[str, Expression] = Field(min_length=1)
    objective: Objectives | None = Field(
        default=None,
        description="Default: metrics.primary and its goal; a list: a multi-objective sweep (its Pareto front)",
    )
    early_termination: EarlyTermination | None = None
    limits: Limits = Field(default_factory=Limits)
    storage: str | None = Field(
        default=None,
        description="An Optuna storage URL shared by many runners (postgresql://…); default: SQLite in TFTRAIN_HOME",
    )
    warm_start: list[Annotated[str, Field(pattern=SWEEP_ID_PATTERN)]] = Field(
        default_factory=empty_list,
        description="Sweep ids whose finished trials seed this one (HyperDrive's resume_from)",
    )

    @property
    def sampling(self) -> Sampling:
        algorithm = self.sampling_algorithm
        return Sampling(type=algorithm) if isinstance(algorithm, str) else algorithm


# A manifest with a `sweep:` section (runner.manifest.manifest_class picks it): Manifest's fields and
# a sweep. The JSON Schema is this model's, titled and described as Manifest: it has every key.
class SweptManifest(Manifest):
    """A training job, as committed in `tftrain.yml`."""

    model_config = ConfigDict(title="Manifest")
    sweep: SweepSpec | None = Field(
        default=None, description="A hyperparameter sweep: each trial a run with sampled script_params"
    )


def grid_size(sweep: SweepSpec) -> int:
    """How many points a grid over `search_space` has (choice and randint only; the rules refuse the rest)."""
    sizes = [
        len(e.values) if e.type == "choice" else e.upper
        for e in sweep.search_space.values()
        if e.type in ("choice", "randint")
    ]
    return math.prod(sizes)


def trial_limit(sweep: SweepSpec) -> int:
    """How many trials the sweep runs at most: limits.max_total_trials, or the grid's size (a grid
    runs each point once: a larger max_total_trials is capped, with a warning at validation)."""
    grid = sweep.sampling.type == "grid"
    if sweep.limits.max_total_trials is not None:
        return min(sweep.limits.max_total_trials, grid_size(sweep)) if grid else sweep.limits.max_total_trials
    if grid:
        return grid_size(sweep)
    raise ValueError("sweep.limits.max_total_trials is required unless sampling is grid")
