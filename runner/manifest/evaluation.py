"""`evaluation:`: how a candidate is judged against the model in production (runner.verdict).

The training script writes one row per evaluation example to `per_example`; tftrain trains the
candidate `seeds` times (TFTRAIN_SEED 0, 1, …), keeps every seed's file as evidence with the run and
the registered version, and compares it, paired on the examples' ids, with the baseline's evidence.
"""

from __future__ import annotations

import math
import posixpath
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from runner.manifest.fields import Model, goal_of_name, inside_path
from runner.manifest.sourcepaths import regular_file_problem

MAX_SEEDS = 100  # the layout's limit (runner.verdict.layout): beyond it a verdict's cost is a mistake
PER_EXAMPLE_SUFFIXES = (".jsonl", ".csv", ".npz")
SEED_VARIABLE = "TFTRAIN_SEED"


class EvaluationSpec(Model):
    per_example: str = Field(
        description=(
            "The file the script writes, one row per evaluation example (.jsonl, .csv or .npz with an `id`), inside"
            " outputs_dir"
        )
    )
    metric: str = Field(
        min_length=1,
        max_length=128,
        description="A per-example field; the model's score is its mean (accuracy = mean of correct)",
    )
    goal: Literal["maximize", "minimize"] | None = Field(
        default=None, description="Default: minimize for names containing loss/error, else maximize"
    )
    seeds: int = Field(
        default=1,
        ge=1,
        le=MAX_SEEDS,
        description="Train the candidate this many times (TFTRAIN_SEED 0, 1, …); seed 0's model is registered",
    )
    margin: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="What counts as no worse, in the metric's units (non-inferiority margin)",
    )
    confidence: float = Field(default=0.95, ge=0.5, lt=1, allow_inf_nan=False, description="The interval's confidence")
    script: str | None = Field(
        default=None,
        description=(
            "`SCRIPT --model DIR --out FILE` writes per_example for any model: the baseline is evaluated on this"
            " run's set"
        ),
    )
    set_seed: bool = Field(
        default=True,
        description="Set Python's, NumPy's and TensorFlow's seeds from TFTRAIN_SEED before the script's first line",
    )
    data: str | None = Field(
        default=None,
        description=(
            "The evaluation data (a file or directory in the run's directory): hashed into the set's fingerprint"
        ),
    )
    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEEDS,
        description=(
            "Seeds trained at once (default: as many as this machine's GPUs and slots allow; clusters queue them)"
        ),
    )

    @field_validator("per_example", "script", "data")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        return None if value is None else inside_path(value)

    @field_validator("per_example")
    @classmethod
    def _format(cls, value: str) -> str:
        if posixpath.splitext(value)[1].lower() not in PER_EXAMPLE_SUFFIXES:
            raise ValueError(
                f"{value!r} must be a {', '.join(PER_EXAMPLE_SUFFIXES)} file (JSON Lines, CSV or NumPy's npz)"
            )
        return value

    @field_validator("margin")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    def goal_for(self) -> str:
        return self.goal or goal_of_name(self.metric)


def check_evaluation(
    spec: EvaluationSpec | None, outputs_dir: str, source: Path | None, variables: dict | None = None
) -> list[tuple[tuple, str]]:
    """The section's cross-field rules: per_example inside outputs_dir (what a run keeps), the
    evaluation script a regular file of the source directory (`source`, when it could be resolved),
    TFTRAIN_SEED left to tftrain (`variables`: environment_variables)."""
    if spec is None:
        return []
    problems: list[tuple[tuple, str]] = []
    if SEED_VARIABLE in (variables or {}):
        problems.append(
            (
                ("environment_variables", SEED_VARIABLE),
                f"{SEED_VARIABLE} is set by tftrain for each seed of `evaluation:`; remove it",
            )
        )
    if not (spec.per_example == outputs_dir or spec.per_example.startswith(outputs_dir + "/")):
        problems.append(
            (("evaluation", "per_example"), f"{spec.per_example!r} must stay inside outputs_dir {outputs_dir!r}")
        )
    if spec.script is not None and source is not None:
        problem = regular_file_problem(source, spec.script)
        if problem:
            problems.append((("evaluation", "script"), problem))
    return problems
