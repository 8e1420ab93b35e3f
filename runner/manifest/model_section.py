"""The `model:` section: what is registered, gated, served (and with which resources), signed and replayed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from runner.manifest.fields import QUANTITY_PATTERN, VERSION_PATTERN, Model, empty_list
from runner.manifest.replay import ReplaySpec
from runner.manifest.signing import SigningSpec


class ServingResources(Model):
    """Azure's resource_configuration: what one serving replica gets (`tftrain deploy`)."""

    cpu: float = Field(default=1.0, gt=0, le=1024, allow_inf_nan=False, description="CPU cores (fractions allowed)")
    memory: str = Field(
        default="2Gi", pattern=QUANTITY_PATTERN, description="Memory, a Kubernetes quantity: 512Mi, 2Gi"
    )
    gpu: int = Field(default=0, ge=0, le=64, description="GPUs")
    # Azure ML's scoring scripts (init/run) on Azure's own inference server (runner/serving/scoring*)
    scoring_script: str | None = Field(
        default=None,
        description="An Azure entry script (init() + run(raw_data)) in source_directory, served on azmlinfsrv",
    )
    conda_file: str | None = Field(
        default=None, description="The scoring script's conda environment file (its pip packages are installed)"
    )
    pip_packages: list[str] = Field(
        default_factory=empty_list, description="The scoring script's packages, beside the model's TensorFlow"
    )
    auth: bool = Field(default=False, description="Azure's auth_enabled: POST /score needs 'Authorization: Bearer KEY'")
    sample_request: str | None = Field(
        default=None,
        description=(
            "A JSON request body in the scoring script's own shape, in source_directory: the gate and the smoke test"
            " post it"
        ),
    )


class ModelSpec(Model):
    path: str = Field(default="outputs/model", description="The model file or directory, inside outputs_dir")
    framework: str = "TensorFlow"
    framework_version: str | None = Field(default=None, pattern=VERSION_PATTERN)
    register_model: bool = Field(
        default=True, alias="register", description="Register the model when the run completes"
    )
    gate: Literal["auto", "required", "off"] = Field(
        default="auto",
        description=(
            "Load the model in a fresh process and predict on a sample before registering it: auto (a SavedModel or "
            "Keras file is checked, other files are registered with a warning), required (anything else fails), off"
        ),
    )
    sample_input: str | None = Field(
        default=None,
        description=(
            "A .npy, .npz or .json (TensorFlow Serving request) file in the source directory; default: synthesised"
        ),
    )
    export: list[Literal["onnx"]] = Field(
        default_factory=empty_list, description="Formats written beside the model: onnx (tf2onnx, verified)"
    )
    export_tolerance: float = Field(
        default=1e-4,
        gt=0,
        le=1e6,
        allow_inf_nan=False,
        description="Largest |ONNX Runtime - TensorFlow| allowed on the sample",
    )
    export_required: bool = Field(default=False, description="Fail the run when an export fails (else a warning)")
    serving: ServingResources = Field(default_factory=ServingResources)
    signing: SigningSpec | None = Field(
        default=None,
        description="Sign the registered model (OpenSSF model signing: model.sig) with the key a secrets: entry holds",
    )
    replay: ReplaySpec | None = Field(
        default=None,
        description=(
            "Before registering, replay real requests against the model and the last release; refuse it when their"
            " answers disagree"
        ),
    )

    @property
    def gated(self) -> bool:
        """The model goes through the gate when it is registered (decided before the training starts)."""
        return self.register_model and self.gate != "off"

    @field_validator("gate", mode="before")
    @classmethod
    def _yaml_switch(cls, value):
        """`gate: off` (and `no`, `false`) is YAML's false; `true` asks for the gate everywhere."""
        return {False: "off", True: "required"}.get(value, value) if isinstance(value, bool) else value
