"""What both importers (SDK v1 scripts, v2 YAML jobs) map alike: counts, the distribution,
environment variables, an argv list as script_params.

`ctx` is an ImportContext; `at` is where a value was written, as its `where` takes it.
"""

from __future__ import annotations

import re
from typing import Any

from runner.importer.values import Obj, looks_numeric
from runner.manifest.fields import ENV_NAME_PATTERN, SIZE_PATTERN

BACKEND = ("distributed_training", "backend")
PREEMPTIBLE_LABEL = "preemptible"
LOW_PRIORITY_RETRY = {"max_attempts": 3, "on": ["preempted", "lost"]}


def put_count(ctx, path: str | tuple[str, ...], value: Any, at: Any, placeholder: Any = 1) -> None:
    """A count the manifest wants ≥ 1; anything else (a reference, an expression) is a TODO."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        ctx.draft.put(path, value)
    else:
        ctx.unresolved(path, value, at, placeholder)


def put_size(ctx, path: str | tuple[str, ...], value: Any, at: Any) -> None:
    """A size like `2g` (the manifest's SIZE_PATTERN); anything else is a TODO."""
    if isinstance(value, str) and re.fullmatch(SIZE_PATTERN, value):
        ctx.draft.put(path, value)
    elif isinstance(value, str):
        ctx.draft.todo(path, f"{value!r} is not a size like '2g'", where=ctx.where(at))
    elif value is not None:
        ctx.unresolved(path, value, at)


def put_distribution(
    ctx, kind: str | None, at: Any, nodes: Any = None, per_node: Any = 1, workers: Any = 1, servers: Any = 0
) -> None:
    """Azure ML's distribution as distributed_training. `kind`: "mpi"; "parameter_server" (TF_CONFIG:
    workers and parameter servers; with no servers, multi_worker_mirrored); None where the job has
    none; any other (PyTorch, Ray) has no equivalent."""
    draft, where = ctx.draft, ctx.where(at)
    if kind is None:
        if nodes not in (None, 1) or per_node not in (None, 1):
            draft.todo(
                "node_count",
                f"node_count={ctx.shown(nodes)} without a distributed backend: choose distributed_training.backend",
                where=where,
            )
        return
    if kind not in ("mpi", "parameter_server"):
        draft.note(
            "dropped", f"{kind}: tftrain trains TensorFlow with mpi, parameter_server or multi_worker_mirrored", where
        )
        return
    put_count(ctx, "node_count", 1 if nodes is None else nodes, at)
    if kind == "mpi":
        draft.put(BACKEND, "mpi")
        put_count(ctx, ("distributed_training", "process_count_per_node"), per_node, at)
        return
    draft.put(BACKEND, "multi_worker_mirrored" if servers == 0 else "parameter_server")
    put_count(ctx, ("distributed_training", "worker_count"), workers, at)
    if servers == 0:
        draft.note(
            "changed", "parameter_server_count=0: TF_CONFIG with workers only → backend: multi_worker_mirrored", where
        )
    else:
        put_count(ctx, ("distributed_training", "parameter_server_count"), servers, at)


def put_variables(ctx, variables: Any, at: Any) -> None:
    """environment_variables: a name the manifest would reject, or a value not known statically, is a TODO."""
    if variables is None:
        return
    if not isinstance(variables, dict):
        ctx.unresolved("environment_variables", variables, at)
        return
    for name, value in variables.items():
        if not isinstance(name, str) or not re.fullmatch(ENV_NAME_PATTERN, name):
            ctx.draft.note("todo", f"environment_variables: {ctx.shown(name)} is no variable name", ctx.where(at))
        elif isinstance(value, (str, int, float, bool)):
            ctx.draft.put(("environment_variables", name), value)
        elif not (isinstance(value, Obj) and value.kind == name):  # not a name only read (obj.child)
            ctx.unresolved(("environment_variables", name), value, at)


def group_flags(items: list[Any]) -> list[tuple[str | None, list[Any]]]:
    """An argv list as (flag, its values): a flag (`--flag=value` too) takes the items up to the next
    flag while they are scalars; any other item is (None, [item]), a positional."""
    groups: list[tuple[str | None, list[Any]]] = []
    for item in items:
        if isinstance(item, str) and item.startswith("-") and not looks_numeric(item):
            flag, equals, value = item.partition("=")
            groups.append((flag, [value] if equals else []))
        elif groups and groups[-1][0] is not None and (not groups[-1][1] or scalars([*groups[-1][1], item])):
            groups[-1][1].append(item)
        else:
            groups.append((None, [item]))
    return groups


def scalars(values: list[Any]) -> bool:
    return all(isinstance(value, (str, int, float)) and not isinstance(value, bool) for value in values)


def put_positional(ctx, value: Any, where: str, known: bool = True) -> None:
    """tftrain passes script_params as flags: a plain positional becomes a key with no value."""
    if known and scalars([value]):
        ctx.draft.put(("script_params", str(value)), None)
        ctx.draft.note("info", f"script_params: positional argument {value!r} is a key with no value (null)", where)
    else:
        ctx.draft.note("todo", f"script_params: positional {ctx.shown(value)}: give the script a flag for it", where)


def bool_as_text(ctx, flag: str, value: bool) -> str:
    """Azure ML passed a bool as the text True/False; `true` in script_params would be a bare flag."""
    ctx.draft.note(
        "changed",
        f"script_params.{flag}: {value} is passed as the text {str(value)!r}, as Azure ML did (true would be a bare"
        " flag)",
    )
    return str(value)


def put_preemptible(ctx, setting: str, at: Any) -> None:
    """Machines that may be taken away (v1's vm_priority='lowpriority', v2's spot tier): a preempted
    or lost run resumes from its checkpoint as the next attempt, on runners labelled preemptible."""
    ctx.draft.put(
        "retry", dict(LOW_PRIORITY_RETRY), "low priority: a preempted or lost run resumes from its checkpoint"
    )
    labels = ctx.draft.get(("compute", "runner_labels")) or []
    ctx.draft.put(
        ("compute", "runner_labels"), [*labels, PREEMPTIBLE_LABEL] if PREEMPTIBLE_LABEL not in labels else labels
    )
    ctx.draft.note(
        "changed",
        f"{setting} → retry: {{max_attempts: 3, on: [preempted, lost]}} on runners labelled {PREEMPTIBLE_LABEL!r}; the"
        " script should checkpoint (e.g. BackupAndRestore under outputs/checkpoints, see docs/retry.md)",
        at,
    )
