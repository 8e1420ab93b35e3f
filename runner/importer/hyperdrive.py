"""Azure ML sweeps → the manifest's `sweep:` section: an SDK v1 HyperDriveConfig, or a v2 `type: sweep`
job's sampling, search space, objective, limits and early termination.

The manifest took its names from Azure's v2 sweep job (runner/manifest/sweep.py), so this is mostly
transcription. Each part is checked against the manifest's own model as it is written: a value that
is not known statically, or that the manifest would refuse, becomes a TODO next to its key and a
line in the report, never a sweep section that fails as a whole.
"""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import ValidationError

from runner.importer.values import Obj, Unknown, known
from runner.manifest.document import YamlDocument
from runner.manifest.sweep import Bandit, Expression, MedianStopping, Objective, Sampling, TruncationSelection

SWEEP = "sweep"
EXPRESSIONS: dict[str, type] = {
    get_args(model.model_fields["type"].annotation)[0]: model for model in get_args(get_args(Expression)[0])
}
POLICIES: dict[str, type] = {
    "bandit": Bandit, "median_stopping": MedianStopping, "truncation_selection": TruncationSelection,
}  # fmt: skip
V1_SAMPLINGS = {
    "RandomParameterSampling": "random", "GridParameterSampling": "grid", "BayesianParameterSampling": "bayesian",
}  # fmt: skip
V1_POLICIES = {
    "BanditPolicy": "bandit", "MedianStoppingPolicy": "median_stopping",
    "TruncationSelectionPolicy": "truncation_selection",
}  # fmt: skip
V1_HANDLED = {
    "hyperparameter_sampling", "primary_metric_name", "primary_metric_goal", "max_total_runs", "max_concurrent_runs",
    "max_duration_minutes", "policy", "estimator", "run_config", "resume_from",
}  # fmt: skip
# A v2 sweep job's own keys; those the trial takes over (compute, inputs…) are merged into it by trial_of.
V2_HANDLED = {
    "$schema", "type", "trial", "sampling_algorithm", "search_space", "objective", "limits", "early_termination",
    "description", "tags", "display_name", "name", "experiment_name", "compute", "inputs", "outputs", "queue_settings",
}  # fmt: skip
SHARED_WITH_TRIAL = ("compute", "inputs", "outputs", "experiment_name", "display_name", "name", "queue_settings")
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
BLOCKS = ("objective", "early_termination")  # written one key a line; expressions and sampling fit on one
WARM_START = "Azure run ids do not exist here: list the tftrain sweep ids whose finished trials seed this one"


# --- shared by both forms ---------------------------------------------------------------------


def refusal(model: type, data: dict[str, Any]) -> str | None:
    """Why the manifest would refuse `data` as `model` (its first error), or None."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        return f"{field}: {error['msg']}" if field else error["msg"]
    return None


def put_checked(ctx, path: tuple[str, ...], model: type, data: dict[str, Any], source: str, where: str) -> bool:
    """`data` under `path` when `model` takes it; a TODO saying why not otherwise."""
    why = refusal(model, data)
    if why is None:
        if path[-1] in BLOCKS:
            for key, value in data.items():
                ctx.draft.put((*path, key), value)
        else:
            ctx.draft.put(path, data)
        return True
    ctx.draft.todo(path, f"{source}: {why}", where=where, report=f"{source} has no equivalent as written: {why}")
    return False


def put_expression(ctx, flag: str, kind: str, params: dict[str, Any], source: str, where: str) -> None:
    path = (SWEEP, "search_space", flag)
    if kind not in EXPRESSIONS:
        ctx.draft.todo(path, f"{source}: no such expression (one of {', '.join(EXPRESSIONS)})", where=where)
    elif not known(params):
        ctx.draft.unresolved(path, source, where)
    else:
        put_checked(ctx, path, EXPRESSIONS[kind], {"type": kind, **params}, source, where)


def put_sampling(ctx, kind: str, options: dict[str, Any], source: str, where: str) -> None:
    """`sampling_algorithm`: the bare name, or {type, seed, rule} when a seed or a rule is set."""
    path = (SWEEP, "sampling_algorithm")
    if not known(options):
        ctx.draft.unresolved(path, source, where, placeholder=kind)
        return
    if isinstance(options.get("rule"), str):
        options = {**options, "rule": options["rule"].lower()}
    if not options:
        ctx.draft.put(path, kind)
    elif not put_checked(ctx, path, Sampling, {"type": kind, **options}, source, where):
        ctx.draft.entry(path).value = kind  # the algorithm is known; only its options need a look


def put_objective(ctx, metric: Any, goal: Any, source: str, where: str) -> None:
    path = (SWEEP, "objective")
    if isinstance(metric, str) and goal in ("maximize", "minimize"):
        put_checked(ctx, path, Objective, {"primary_metric": metric, "goal": goal}, source, where)
    else:
        ctx.draft.todo(
            path,
            f"{source}: set primary_metric and goal (maximize|minimize)",
            where=where,
            report=f"not resolved statically: {source}",
        )


def put_policy(ctx, kind: str, params: dict[str, Any], source: str, where: str) -> None:
    path = (SWEEP, "early_termination")
    if not known(params):
        ctx.draft.unresolved(path, source, where)
    else:
        put_checked(ctx, path, POLICIES[kind], {"type": kind, **params}, source, where)


def put_seconds(ctx, key: str, value: Any, source: str, where: str, per_unit: int = 1) -> None:
    """A count of limits: (max_total_trials, timeout…) that must be a whole number ≥ 1."""
    path = (SWEEP, "limits", key)
    amount = value * per_unit if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if amount is not None and amount >= 1 and float(amount).is_integer():
        ctx.draft.put(path, int(amount))
    elif amount is not None:
        ctx.draft.todo(path, f"{source}: expected a whole number ≥ 1", where=where)
    else:
        ctx.draft.unresolved(path, source, where)


def number(value: Any) -> Any:
    """`1e-5` is text to a YAML 1.1 reader (PyYAML) but a number to Azure's: read it as Azure did."""
    if isinstance(value, str) and NUMBER.match(value.strip()):
        return float(value) if re.search(r"[.eE]", value) else int(value)
    return value


# --- SDK v1: HyperDriveConfig ------------------------------------------------------------------


def from_hyperdrive(ctx, config: Obj) -> None:
    """`ctx`: azureml_py.PyImport; `config`: the submitted HyperDriveConfig."""
    attrs, draft = config.attrs, ctx.draft
    sampling = attrs.get("hyperparameter_sampling")
    if isinstance(sampling, Obj) and sampling.kind in V1_SAMPLINGS:
        _v1_sampling(ctx, sampling)
    else:
        draft.unresolved((SWEEP, "search_space"), ctx.shown(sampling), ctx.at(config, "hyperparameter_sampling"))
    metric, goal = attrs.get("primary_metric_name"), attrs.get("primary_metric_goal")
    source = f"primary_metric_name={ctx.shown(metric)}, primary_metric_goal={ctx.shown(goal)}"
    put_objective(ctx, metric, _goal(ctx, goal), source, ctx.at(config, "primary_metric_name"))
    policy = attrs.get("policy")
    if isinstance(policy, Obj) and policy.kind in V1_POLICIES:
        params = {k: v for k, v in policy.attrs.items() if not k.startswith("_") and v is not None}
        put_policy(ctx, V1_POLICIES[policy.kind], params, ctx.shown(policy), ctx.where(policy.line))
    elif policy is not None and not (isinstance(policy, Obj) and policy.kind == "NoTerminationPolicy"):
        draft.unresolved((SWEEP, "early_termination"), ctx.shown(policy), ctx.at(config, "policy"))
    for key, limit, per_unit in (
        ("max_total_runs", "max_total_trials", 1),
        ("max_concurrent_runs", "max_concurrent_trials", 1),
        ("max_duration_minutes", "timeout", 60),
    ):
        if attrs.get(key) is not None:
            put_seconds(ctx, limit, attrs[key], f"{key}={ctx.shown(attrs[key])}", ctx.at(config, key), per_unit)
    if attrs.get("max_concurrent_runs") is None:
        draft.note(
            "info",
            "sweep.limits.max_concurrent_trials: Azure ran as many trials at once as the cluster took; "
            "tftrain runs 1 unless set",
        )
    if attrs.get("resume_from") is not None:
        shown = ctx.shown(attrs["resume_from"])
        draft.todo((SWEEP, "warm_start"), f"was resume_from={shown}; {WARM_START}", where=ctx.at(config, "resume_from"))
    for key, value in attrs.items():
        if key not in V1_HANDLED and not key.startswith("_") and key != "*":
            what = f"HyperDriveConfig {key}={ctx.shown(value)}"
            draft.note("dropped", f"{what}: no equivalent in tftrain", ctx.at(config, key))


def _v1_sampling(ctx, sampling: Obj) -> None:
    where = ctx.where(sampling.line)
    properties = sampling.attrs.get("properties") or {}
    options = properties
    if isinstance(properties, dict):
        options = {k: v for k, v in properties.items() if k in ("seed", "rule")}
    put_sampling(ctx, V1_SAMPLINGS[sampling.kind], options, f"properties={ctx.shown(properties)}", where)
    space = sampling.attrs.get("parameter_space")
    if not isinstance(space, dict):
        ctx.draft.unresolved((SWEEP, "search_space"), ctx.shown(space), where)
        return
    for key, expression in space.items():
        if not isinstance(key, str):
            shown = ctx.shown(key)
            ctx.draft.note("todo", f"sweep.search_space: a parameter name not known statically: {shown}", where)
            continue
        flag = key if key.startswith("-") else f"--{key}"
        if flag != key:
            at = ctx.where(expression.line) if isinstance(expression, Obj) else where
            ctx.draft.note("changed", f"sweep.search_space: {key!r} → {flag!r}, the flag HyperDrive passed it as", at)
        if not isinstance(expression, Obj) or expression.kind not in EXPRESSIONS:
            ctx.draft.unresolved((SWEEP, "search_space", flag), ctx.shown(expression), where)
            continue
        args = expression.attrs.get("*", [])
        if expression.kind == "choice":
            params = {"values": args[0] if len(args) == 1 and isinstance(args[0], list) else args}
        else:
            params = {k: v for k, v in expression.attrs.items() if not k.startswith("_") and k != "*"}
        put_expression(ctx, flag, expression.kind, params, ctx.shown(expression), ctx.where(expression.line))


def _goal(ctx, value: Any) -> str | None:
    """PrimaryMetricGoal.MAXIMIZE (an enum the reading does not evaluate) or the text 'maximize'."""
    text = ctx.segment(value.node) if isinstance(value, Unknown) else value
    goal = text.rsplit(".", 1)[-1].lower() if isinstance(text, str) else None
    return goal if goal in ("maximize", "minimize") else None


# --- v2 YAML: type: sweep ------------------------------------------------------------------------


def trial_of(doc: YamlDocument) -> YamlDocument:
    """The sweep job's trial as a command job of its own: what the sweep sets for all trials (compute,
    inputs, outputs, the experiment's name) joins it unless the trial sets it itself."""
    job, trial = doc.data, dict(doc.data["trial"])
    lines = {loc[1:]: line for loc, line in doc.lines.items() if loc[:1] == ("trial",)}
    for key in SHARED_WITH_TRIAL:
        if key in job and key not in trial:
            trial[key] = job[key]
            lines.update({loc: line for loc, line in doc.lines.items() if loc[:1] == (key,)})
    return YamlDocument(doc.path, trial, lines)


def from_sweep_job(ctx, flags: dict[str, str]) -> None:
    """`ctx`: an azureml_v2.V2Import over the whole sweep job; `flags`: search_space name → the flag
    of the trial's command whose value was ${{search_space.NAME}}."""
    job, draft = ctx.doc.data, ctx.draft
    algorithm = job.get("sampling_algorithm", "random")
    kind = algorithm.get("type") if isinstance(algorithm, dict) else algorithm
    kind = kind.lower() if isinstance(kind, str) else kind
    if kind in ("random", "grid", "bayesian"):
        options = {k: number(v) for k, v in algorithm.items() if k != "type"} if isinstance(algorithm, dict) else {}
        if "logbase" in options and str(options.pop("logbase")) != "e":
            why = "sampling_algorithm.logbase: tftrain's log expressions are base e"
            draft.note("dropped", why, ctx.where("sampling_algorithm"))
        put_sampling(ctx, kind, options, f"sampling_algorithm: {algorithm!r}", ctx.where("sampling_algorithm"))
    else:
        why = f"{algorithm!r}: expected random, grid or bayesian"
        draft.todo((SWEEP, "sampling_algorithm"), why, "random", ctx.where("sampling_algorithm"))
    _v2_search_space(ctx, job.get("search_space"), flags)
    objective = job.get("objective") if isinstance(job.get("objective"), dict) else {}
    goal = objective.get("goal")
    goal = goal.lower() if isinstance(goal, str) else goal
    put_objective(ctx, objective.get("primary_metric"), goal, f"objective: {objective!r}", ctx.where("objective"))
    policy = job.get("early_termination")
    if isinstance(policy, dict) and policy.get("type") in POLICIES:
        params = {k: number(v) for k, v in policy.items() if k != "type"}
        put_policy(ctx, policy["type"], params, f"early_termination: {policy!r}", ctx.where("early_termination"))
    elif policy is not None:
        why = f"{policy!r}: expected type bandit, median_stopping or truncation_selection"
        draft.todo((SWEEP, "early_termination"), why, where=ctx.where("early_termination"))
    limits = job.get("limits") if isinstance(job.get("limits"), dict) else {}
    for key, value in limits.items():
        if key in ("max_total_trials", "max_concurrent_trials", "timeout", "trial_timeout"):
            put_seconds(ctx, key, number(value), f"limits.{key}: {value!r}", ctx.where("limits", key))
        else:
            draft.note("dropped", f"limits.{key}: no equivalent in tftrain", ctx.where("limits", key))
    for key in job:
        if key not in V2_HANDLED:
            draft.note("dropped", f"{key}: no equivalent in tftrain", ctx.where(key))


def _v2_search_space(ctx, space: Any, flags: dict[str, str]) -> None:
    if not isinstance(space, dict) or not space:
        why = f"{space!r}: expected a mapping of names to expressions"
        ctx.draft.todo((SWEEP, "search_space"), why, where=ctx.where("search_space"))
        return
    for name, spec in space.items():
        where = ctx.where("search_space", name)
        if name not in flags:
            why = f"sweep.search_space: {name!r} is not a whole flag value of the trial's command: not swept"
            ctx.draft.note("todo", why, where)
            continue
        kind = spec.get("type") if isinstance(spec, dict) else None
        params = {k: number(v) for k, v in spec.items() if k != "type"} if isinstance(spec, dict) else {}
        if kind == "choice" and isinstance(params.get("values"), list):
            params["values"] = [number(v) for v in params["values"]]
        put_expression(ctx, flags[name], str(kind), params, f"search_space.{name}: {spec!r}", where)
