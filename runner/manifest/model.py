"""The manifest's data model: keys follow Azure ML's `TensorFlow` estimator.

Every model is frozen and forbids unknown keys; cross-field rules live in validators so that
the JSON Schema (`tftrain schema`) and the checks come from one source.
"""

from __future__ import annotations

import posixpath
import re
import warnings
from typing import Annotated, Literal, Union

from pydantic import Field, PlainValidator, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from runner.manifest.checkpoints import CheckpointsSpec
from runner.manifest.cost import ComputeCostSpec
from runner.manifest.distributed import MpiTraining, MultiWorkerMirroredTraining, ParameterServerTraining
from runner.manifest.evaluation import EvaluationSpec
from runner.manifest.fields import (
    MAX_NODES,
    MAX_PER_NODE,
    MAX_SECONDS,
    MAX_TASKS,
    NAME_PATTERN,
    SIZE_PATTERN,
    VERSION_PATTERN,
    Model,
    ParamValue,
    Scalar,
    empty_list,
    goal_of_name,
)
from runner.manifest.images import ImageRegistry
from runner.manifest.model_section import ModelSpec
from runner.manifest.retry import RetrySpec
from runner.manifest.slurm import SlurmSpec
from runner.manifest.sources import check_sources
from runner.shared import catalog


class InputSpec(Model):
    source: str | list[str] = Field(
        description=(
            "https://…, s3://bucket/prefix or a local path (relative to the manifest); "
            "or a list of https:// files, downloaded into one directory (each named after its URL's path)"
        )
    )
    mode: Literal["download", "mount"] = "download"
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="Expected sha256 of the file (or of the SHA256SUMS of a prefix or of a list's files)",
    )
    endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint for s3:// sources (default: AWS, or $AWS_ENDPOINT_URL)"
    )

    @field_validator("source", mode="before")
    @classmethod
    def _sources(cls, value):
        """One line for any wrong source (a union's members would each say theirs)."""
        return check_sources(value)


DistributedTraining = Annotated[
    Union[MpiTraining, ParameterServerTraining, MultiWorkerMirroredTraining], Field(discriminator="backend")
]


class KubernetesSpec(Model):
    namespace: str = Field(default="default", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    image: str | None = Field(
        default=None,
        description=(
            "An image the cluster can pull that holds the code at /workspace (else tftrain builds and pushes one)"
        ),
    )
    registry: str | None = Field(
        default=None, description="Where tftrain pushes the code image, e.g. registry.example.com:5000/team"
    )


# 30 s to save a checkpoint (SageMaker gives 120) where the manifest expects preemption (`retry:`);
# elsewhere the 10 s runs always had, which the Kubernetes jobs' deadlines are built from
STOP_GRACE_SECONDS = 30.0
KILL_GRACE_SECONDS = 10.0
MAX_GRACE_SECONDS = 3600


def _target_name(name: object) -> str:
    """`name` when the catalog has the target (a plugin's too); pydantic's literal_error otherwise, so
    the manifest's line is "'x' is not one of … (did you mean …)" (runner.manifest.validate)."""
    if isinstance(name, str) and catalog.row_of(name) is not None:
        return name
    known = catalog.names()
    raise PydanticCustomError(
        "literal_error",
        "Input should be {expected}",
        {"expected": ", ".join(repr(n) for n in known[:-1]) + f" or {known[-1]!r}"},
    )


TargetName = Annotated[
    str, PlainValidator(_target_name), WithJsonSchema({"type": "string", "enum": list(catalog.BUILT_IN)})
]


class ComputeSpec(Model):
    target: TargetName | None = Field(
        default=None,
        description="Where the job runs; default: docker when use_docker is true, else local (or a plugin's target)",
    )
    slots_per_node: int | None = Field(
        default=None,
        ge=1,
        le=1 << 20,
        description=(
            "Processes a node can take; when set, validation checks the job fits (else the run checks the machine)"
        ),
    )
    # None: not given (the manifest's grace_seconds decides); a stored manifest round-trips as it was written
    kill_grace_seconds: float | None = Field(
        default=None,
        ge=0,
        le=MAX_GRACE_SECONDS,
        allow_inf_nan=False,
        description=(
            "Time between SIGTERM and SIGKILL when a run is stopped (the same as stop_grace_seconds; default"
            f" {KILL_GRACE_SECONDS:g})"
        ),
    )
    memory_limit: str | None = Field(
        default=None, pattern=SIZE_PATTERN, description="Container memory limit (docker target), e.g. 8g"
    )
    kubernetes: KubernetesSpec = Field(default_factory=KubernetesSpec)
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    runner_labels: list[str] = Field(
        default_factory=empty_list, description="Extra labels of the self-hosted GitHub runners that may train this"
    )
    gpu_type: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="GPU model the job needs (e.g. a100): a runner label, and a constraint on pool hosts' gpu_type",
    )
    pool_file: str = Field(
        default=".github/tftrain-pool.yml",
        description="The runner pool's inventory (target: pool), relative to the manifest's directory",
    )
    hosts: list[str] = Field(default_factory=empty_list, description="Pool hosts this job may use (default: any)")
    host_labels: list[str] = Field(
        default_factory=empty_list, description="Labels every pool host of this job must have"
    )
    queue_timeout_seconds: int = Field(
        default=3600,
        ge=0,
        le=MAX_SECONDS,
        description=(
            "How long a pool job waits for free GPUs/slots, or a Slurm job stays PENDING, before it fails (0: fail at"
            " once)"
        ),
    )
    cost: ComputeCostSpec | None = Field(
        default=None,
        description=(
            "Prices ({gpu_hour, cpu_hour, currency}): the run records its cost (default: the pool file's cost, if any)"
        ),
    )


class MetricsSpec(Model):
    primary: str | None = None
    goal: Literal["maximize", "minimize"] | None = Field(
        default=None, description="Default: minimize for names containing loss/error, else maximize"
    )
    regex: dict[str, str] = Field(
        default_factory=dict,
        description="metric name → pattern applied to each log line; group 1 (or `value`) is the value",
    )
    ranks: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], min_length=1, description="Whose logs and metrics files give the run's metrics"
    )

    @field_validator("regex")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, pattern in patterns.items():
            try:
                with warnings.catch_warnings():  # "possible nested set" and the like: the pattern is the user's
                    warnings.simplefilter("ignore")
                    compiled = re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"{name}: invalid regular expression: {exc}") from None
            if compiled.groups < 1:
                raise ValueError(f"{name}: the pattern needs a capture group for the value")
        return patterns

    def goal_for(self, name: str) -> str:
        if self.goal and name == self.primary:
            return self.goal
        return goal_of_name(name)


class Manifest(Model):
    """A training job, as committed in `tftrain.yml`."""

    name: str = Field(pattern=NAME_PATTERN, description="Model name; also names runs and releases")
    source_directory: str = Field(default=".", description="Relative to the manifest's directory (or absolute)")
    entry_script: str
    script_params: dict[str, ParamValue] = Field(default_factory=dict)
    framework_version: str | None = Field(default=None, pattern=VERSION_PATTERN)
    use_gpu: bool = False
    use_docker: bool = False
    custom_docker_image: str | None = None
    image_registry: ImageRegistry | None = Field(
        default=None,
        description="Log in to this registry (address, username, password_secret) to pull custom_docker_image",
    )
    user_managed: bool = Field(
        default=False,
        description="Use the interpreter (`python`) or custom_docker_image as it is: tftrain installs nothing",
    )
    python: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "With user_managed: the interpreter (a path; default: tftrain's own), or inside the image (default:"
            " python3)"
        ),
    )
    pip_packages: list[str] = Field(default_factory=empty_list)
    conda_packages: list[str] = Field(default_factory=empty_list)
    pip_requirements_file: str | None = None
    conda_dependencies_file: str | None = None
    environment_variables: dict[str, Scalar] = Field(default_factory=dict)
    secrets: list[str] = Field(
        default_factory=empty_list,
        description=(
            "Names of variables in tftrain's environment handed to the training at run time, masked in every log"
        ),
    )
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    shm_size: str | None = Field(default=None, pattern=SIZE_PATTERN)
    resume_from: str | None = Field(
        default=None,
        description="model:NAME@vN|@latest, a run id, checkpoint:RUN_ID (its latest synced checkpoint), or a path",
    )
    checkpoints: CheckpointsSpec | None = Field(
        default=None,
        description=(
            "Copy a checkpoint directory to S3 while the training runs (resume with resume_from: checkpoint:RUN_ID)"
        ),
    )
    max_run_duration_seconds: int | None = Field(default=None, ge=1, le=MAX_SECONDS)
    node_count: int = Field(default=1, ge=1, le=MAX_NODES)
    process_count_per_node: int | None = Field(default=None, ge=1, le=MAX_PER_NODE)
    distributed_training: DistributedTraining | None = None
    distributed_backend: Literal["mpi", "ps"] | None = Field(
        default=None, description="Deprecated: use distributed_training.backend"
    )
    worker_count: int | None = Field(
        default=None, ge=1, le=MAX_TASKS, description="Deprecated: use distributed_training.worker_count"
    )
    parameter_server_count: int | None = Field(
        default=None, ge=1, le=MAX_TASKS, description="Deprecated: use distributed_training.parameter_server_count"
    )
    compute: ComputeSpec = Field(default_factory=ComputeSpec)
    # after `compute`: its validator sees compute.kill_grace_seconds, the same setting's older name
    stop_grace_seconds: float | None = Field(
        default=None,
        ge=0,
        le=MAX_GRACE_SECONDS,
        allow_inf_nan=False,
        description=(
            "On cancel, time limit or preemption the training gets SIGTERM and this long to save before SIGKILL"
            f" (default {STOP_GRACE_SECONDS:g} with retry:, else {KILL_GRACE_SECONDS:g}; also written"
            " compute.kill_grace_seconds)"
        ),
    )
    retry: RetrySpec | None = Field(
        default=None,
        description="Start another attempt, resuming from the last checkpoint, when a run is preempted or lost",
    )
    compat: Literal["azureml", "none"] | None = Field(
        default=None,
        description=(
            "azureml: Azure ML's Run API (Run.get_context(), run.log, …) routed into tftrain; none: never; "
            "default: azureml when the entry script imports azureml and the real SDK is not installed"
        ),
    )
    outputs_dir: str = "outputs"
    logs_dir: str = "logs"
    model: ModelSpec = Field(default_factory=ModelSpec)
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    evaluation: EvaluationSpec | None = Field(
        default=None,
        description="Judge the model against the last release on per-example evidence from several seeds (the verdict)",
    )
    # a manifest with a `sweep:` section is a SweptManifest (runner/manifest/sweep.py): the sweep's
    # twenty models are defined and built only for one (~13 ms of every other run's start)
    sweep: None = None

    @field_validator("stop_grace_seconds")
    @classmethod
    def _one_grace(cls, value: float | None, info) -> float | None:
        compute = info.data.get("compute")
        if value is not None and compute is not None and compute.kill_grace_seconds is not None:
            raise ValueError("compute.kill_grace_seconds is the same setting; keep only one of them")
        return value

    @property
    def grace_seconds(self) -> float:
        """How long a stopped training has between SIGTERM and SIGKILL, whichever name gave it."""
        if self.stop_grace_seconds is not None:
            return self.stop_grace_seconds
        if self.compute.kill_grace_seconds is not None:
            return self.compute.kill_grace_seconds
        return STOP_GRACE_SECONDS if self.retry is not None else KILL_GRACE_SECONDS

    @field_validator("outputs_dir", "logs_dir", "entry_script", "pip_requirements_file", "conda_dependencies_file")
    @classmethod
    def _relative(cls, value: str | None, info) -> str | None:
        if value is None:
            return None
        normal = posixpath.normpath(value)
        if posixpath.isabs(normal) or normal == ".." or normal.startswith("../"):
            raise ValueError(f"{value!r} must be a relative path that stays inside its directory")
        if normal == "." and info.field_name in ("outputs_dir", "logs_dir"):
            raise ValueError(f"{value!r} must name a directory below the source directory, not the directory itself")
        return normal


def effective_target(manifest: Manifest) -> str:
    """The target a run goes to: compute.target, else docker for use_docker, else local."""
    if manifest.compute.target:
        return manifest.compute.target
    return "docker" if manifest.use_docker else "local"
