"""`model.replay:`: before a model is registered, real requests are sent to it and to the version it
would replace, and their answers compared (runner.replay). Below `min_agreement`, or slower than
`max_latency_ratio` times the baseline's p99, the model is not registered."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator

from runner.manifest.fields import Model, inside_path
from runner.manifest.sourcepaths import resolve_inside

LAST_RELEASE = "last-release"
RELEASE_PREFIX = "release:"  # runner.serving.refs's: a release's kept requests
VERSION_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}@(v[1-9][0-9]{0,8}|latest)$")
MAX_CONCURRENCY = 64


class ReplaySpec(Model):
    requests: str = Field(
        description=(
            "Requests to replay: a JSON Lines file or a `tftrain serve --record` directory in the source directory, "
            "a TF Serving warmup file (tf_serving_warmup_requests), or release:TAG (the requests a release kept)"
        )
    )
    min_agreement: float = Field(
        default=0.99,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "Share of requests answered by both whose answers match the baseline's (top class for classifiers; within"
            " tolerance otherwise)"
        ),
    )
    tolerance: float = Field(
        default=1e-3,
        ge=0,
        le=1e6,
        allow_inf_nan=False,
        description="Largest |Δ| of one output value counted as the same answer",
    )
    max_latency_ratio: float | None = Field(
        default=1.5,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description=(
            "Candidate p99 / baseline p99 on the same requests, machine and concurrency (null: latency is reported,"
            " never refused)"
        ),
    )
    against: str = Field(
        default=LAST_RELEASE,
        description=(
            "The baseline: last-release (the last GitHub release; without GitHub, the version this home registered"
            " last) or NAME@vN"
        ),
    )
    max_requests: int = Field(default=1000, ge=1, le=100_000, description="Replay at most this many (the first ones)")
    concurrency: int = Field(
        default=4, ge=1, le=MAX_CONCURRENCY, description="Requests in flight to each model at once"
    )
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False, description="One request's limit")
    warmup: bool = Field(
        default=True,
        description=(
            "Write the requests as TF Serving's warmup file into a SavedModel's assets.extra/ (TF Serving and KServe"
            " warm up on them)"
        ),
    )

    @field_validator("requests")
    @classmethod
    def _requests(cls, value: str) -> str:
        if value.startswith(RELEASE_PREFIX):
            if not value[len(RELEASE_PREFIX) :].strip():
                raise ValueError("release: needs a tag, e.g. release:mnist-v3")
            return value
        return inside_path(value)

    @field_validator("against")
    @classmethod
    def _against(cls, value: str) -> str:
        if value != LAST_RELEASE and not VERSION_REF.match(value) and not value.startswith(RELEASE_PREFIX):
            raise ValueError(f"{value!r}: give last-release, NAME@vN, NAME@latest or release:TAG")
        return value

    @property
    def from_release(self) -> str | None:
        """The tag whose kept requests are replayed, or None for a file of the source directory."""
        return self.requests[len(RELEASE_PREFIX) :] if self.requests.startswith(RELEASE_PREFIX) else None


def check_replay(spec: ReplaySpec | None, source: Path, register: bool, gate: str) -> list[tuple[tuple, str]]:
    """The section's rules across fields: the requests a file or directory of the source directory,
    and a replay only where something is registered through the gate."""
    if spec is None:
        return []
    problems: list[tuple[tuple, str]] = []
    if not register or gate == "off":
        problems.append(
            (
                ("model", "replay"),
                "a replay runs before registration, after the gate: it needs model.register and model.gate not off",
            )
        )
    if spec.from_release is None:
        resolved, problem = resolve_inside(source, spec.requests)
        if problem:
            problems.append((("model", "replay", "requests"), problem))
        elif not (resolved.is_file() or resolved.is_dir()):
            problems.append(
                (("model", "replay", "requests"), f"{spec.requests!r} not found in source_directory {source}")
            )
    return problems
