"""`checkpoints:`: a directory of the run's outputs copied to S3 while the training runs, so that
a lost machine loses at most `every_seconds` of work (runner.training.checkpoints does the copying)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from runner.manifest.fields import Model, inside_path

BUCKET_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


class CheckpointsSpec(Model):
    dir: str = Field(
        default="outputs/checkpoints",
        description="The checkpoint directory, relative to the source directory, inside outputs_dir",
    )
    sync_to: str = Field(description="s3://bucket/prefix; each run's checkpoints go under prefix/RUN_ID")
    every_seconds: float = Field(
        default=60.0,
        ge=0.5,
        le=86400,
        allow_inf_nan=False,
        description="Time between two syncs while the training runs",
    )
    endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL)"
    )

    @field_validator("dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        return inside_path(value, "a relative path below the source directory")

    @field_validator("sync_to")
    @classmethod
    def _s3(cls, value: str) -> str:
        if not BUCKET_URI.match(value):
            raise ValueError(
                f"{value!r} must be s3://bucket or s3://bucket/prefix (a bucket name: 3-63 of a-z 0-9 . -)"
            )
        return value

    @property
    def bucket(self) -> str:
        return self.sync_to[len("s3://") :].partition("/")[0]

    def prefix_for(self, run_id: str) -> str:
        """Where one run's checkpoints go: the key prefix under the bucket."""
        prefix = self.sync_to[len("s3://") :].partition("/")[2].strip("/")
        return f"{prefix}/{run_id}" if prefix else run_id
