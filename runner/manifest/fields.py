"""What the manifest's models share: the strict frozen base, name patterns and limits, and the
scalar / script-parameter value forms (a union told apart by the value's kind, one error each)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Tag

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
VERSION_PATTERN = r"^\d+\.\d+(\.\d+)?$"
SIZE_PATTERN = r"^\d{1,12}(\.\d{1,6})?[bkmgBKMG]?$"
QUANTITY_PATTERN = r"^\d{1,12}(\.\d{1,6})?(Ki|Mi|Gi|Ti|k|M|G|T)?$"  # Kubernetes' memory quantities
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
INPUT_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$"  # it names $TFTRAIN_INPUT_NAME and a mount point
MAX_NODES = 1024
MAX_PER_NODE = 1024
MAX_TASKS = 4096
MAX_SECONDS = 366 * 24 * 3600  # longer waits overflow timers; no job runs a year
# the sweep section's names that validate.py's messages use (runner/manifest/sweep.py's models are
# imported only for a manifest with a sweep)
SWEEP_ID_PATTERN = (  # a sweep's id: `NAME-sweep-3` (N may be a workflow run id)
    rf"^(?:{NAME_PATTERN[1:-1]})-sweep-[0-9]{{1,20}}$"
)
EXPRESSIONS = (
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
)
POLICIES = ("bandit", "median_stopping", "truncation_selection", "asha", "hyperband")


def inside_path(value: str, what: str = "a relative path that stays inside its directory") -> str:
    """`value` normalised, ValueError unless it is relative and stays below its directory."""
    import posixpath

    normal = posixpath.normpath(value)
    if posixpath.isabs(normal) or normal in (".", "..") or normal.startswith("../"):
        raise ValueError(f"{value!r} must be {what}")
    return normal


def goal_of_name(name: str) -> str:
    """A metric's goal from its name: minimize for losses and errors, else maximize."""
    lowered = name.lower()
    return "minimize" if any(word in lowered for word in ("loss", "error", "mse", "mae")) else "maximize"


def empty_list() -> list:
    """A list field's default_factory. pydantic reads a factory's signature (does it take the
    validated data?): `list`'s is parsed from its text signature by tokenize, whose pattern compiles
    on first use (~7 ms of the first validation before a script starts); a function's is read as is."""
    return []


class Model(BaseModel):
    # strict: `true` is no 1 and 'yes' no boolean; a wrong type is an error, never a guess.
    # defer_build: a model's validator is built on its first use, not when its module loads
    # (`tftrain --version` and the other commands never pay for the manifest's forty models)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True, defer_build=True)


class InputRef(Model):
    """`--data: {input: NAME}` passes the path of input NAME."""

    input: str


class ResumeRef(Model):
    """`--resume-from: {resume_from: true}` passes the path resolved from `resume_from`."""

    resume_from: Literal[True]


def _kind(value: Any) -> str | None:
    """The union member a value is validated as, so that a wrong value gets one error, not one per member."""
    if value is None:
        return "null"
    for kinds, name in (
        ((bool,), "bool"),
        ((int,), "int"),
        ((float,), "float"),
        ((str,), "str"),
        ((list, tuple), "list"),
    ):
        if isinstance(value, kinds):
            return name
    if isinstance(value, (dict, InputRef, ResumeRef)):
        keys = value if isinstance(value, dict) else type(value).model_fields
        return "input" if "input" in keys else "resume_from" if "resume_from" in keys else None
    return None


def _tagged(members: dict[str, Any], error: str) -> Any:
    return Annotated[
        Union[tuple(Annotated[member, Tag(tag)] for tag, member in members.items())],
        Discriminator(_kind, custom_error_type="value_form", custom_error_message=error),
    ]


_SCALARS = {"bool": bool, "int": int, "float": float, "str": str}
Scalar = _tagged(_SCALARS, "must be a string, number or boolean")
ParamValue = _tagged(
    {**_SCALARS, "list": list[Scalar], "input": InputRef, "resume_from": ResumeRef, "null": None},
    "must be a string, number, boolean, null, a list of those, {input: NAME} or {resume_from: true}",
)


def env_text(value) -> str:
    """An environment_variables value as the tasks' environment holds it: booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
