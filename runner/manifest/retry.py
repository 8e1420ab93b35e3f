"""`retry:`: a run that ends for a cause the manifest names (its machine taken away, tftrain itself
lost, an exit code) starts again as a new attempt that resumes from the previous one's checkpoint
(runner.training.retry does the retrying)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from runner.manifest.fields import Model, empty_list

MAX_ATTEMPTS = 100
RetryCause = Literal["preempted", "lost"]


class RetrySpec(Model):
    max_attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS, description="Attempts in all, the first included")
    on: list[RetryCause] = Field(
        default_factory=lambda: ["preempted", "lost"],
        description=(
            "preempted: the machine, container or training was taken away (SIGTERM to tftrain, a lost host, a kill by"
            " SIGKILL/SIGTERM it did not send); lost: tftrain itself was killed and the next `tftrain run` finds the"
            " run orphaned"
        ),
    )
    exit_codes: list[Annotated[int, Field(ge=1, le=255)]] = Field(
        default_factory=empty_list, description="The script's exit codes that also start another attempt"
    )

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data):
        """YAML 1.1 reads a bare `on:` key as the boolean true (GitHub's workflows do the same): it means `on`."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if key is True else key): value for key, value in data.items()}
        return data

    @field_validator("on", "exit_codes")
    @classmethod
    def _once(cls, values: list) -> list:
        repeated = sorted({str(value) for value in values if values.count(value) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once")
        return values

    def retries(self, cause: str) -> bool:
        return cause in self.on
