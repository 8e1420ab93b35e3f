"""A step of the model gate (`check`, or the ONNX export) as runner.serving.model_check runs it in a
process of its own: where no environment of the run's is at hand, in a cached virtualenv of the
requirements the step names; bounded by PROBE_SECONDS; its verdict read from STEP-result.json.
The gate (runner.serving.gate) and the export (runner.serving.onnx_export) share these, so neither
imports the other."""

from __future__ import annotations

import json
from pathlib import Path

from runner.errors import ModelGateError
from runner.history.rundir import RunPaths
from runner.telemetry.logger import Logger

PROBE_SECONDS = 900.0  # importing TensorFlow on a loaded 2-core runner takes seconds, a large model's load minutes


def cached_env(
    requirements: tuple[str, ...], constraints: str | None, paths: RunPaths, logger: Logger
) -> tuple[str, str]:
    """The Python of a cached virtualenv holding `requirements`, and how it is described."""
    from runner.environments import prepare_env, requirements_spec

    spec = requirements_spec(requirements, constraints)
    env = prepare_env(spec, paths.workdir, logger, paths.serving / "environment.log", console=False)
    return env.python, spec.describe()


def ran(status: int | None | bool, log: Path) -> None:
    """ModelGateError when the step's process ran out of time (run_probe's None)."""
    if status is None:
        raise ModelGateError(f"the gate's process ran past {PROBE_SECONDS:.0f} s and was stopped (log: {log})")


def verdict(out: Path, step: str, log: Path) -> dict:
    """What the step wrote to STEP-result.json; a process that ended without one is a failure
    quoting its log's last line."""
    try:
        return json.loads((out / f"{step}-result.json").read_text())
    except (OSError, ValueError):
        tail = _last_line(log)
        return {"ok": False, "error": f"the {step} process ended without a verdict" + (f": {tail}" if tail else "")}


def _last_line(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
