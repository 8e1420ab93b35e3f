"""The gate between a trained model and the registry: the model is loaded in a fresh process of the
run's own environment, its serving signatures are read, it predicts on a sample; with
`model.export: [onnx]` it is then exported (runner.serving.onnx_export). A model that fails is not
registered. Each step runs in a process of its own (runner.serving.steps).

The gate reads only what registration will hold: links that lead out of outputs/, or into the
model it loads, are refused before anything is read (runner.serving.contained). Files that are no
model it knows (checkpoints, pickles, an .h5 of weights alone) are registered with a warning
naming what was not checked; `gate: required` and `export_required: true` make that a failure.

What it leaves in the run directory's serving/ (copied into the version by the registry):
serving.json, sample.npz, predictions.npz, model.onnx + export.json, check.log / export.log.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from runner.environments.prepared import Environment, Probe
from runner.errors import ModelGateError
from runner.frameworks.serving import framework_constraints, serving_requirements
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.manifest.model import ModelSpec
from runner.serving.contained import model_links, printable, refuse_leaving, refuse_read_through
from runner.serving.gate_report import ServingReport
from runner.serving.onnx_export import export_onnx
from runner.serving.signature import locate
from runner.serving.steps import PROBE_SECONDS, cached_env, ran, verdict
from runner.telemetry.logger import Logger

GATE_FILES = ("serving.json", "sample.npz", "predictions.npz")
KNOWN = "a SavedModel, a .keras/.h5 model file, or a Keras JSON with its weights file"


@dataclass(frozen=True)
class GateResult:
    directory: Path  # the run's serving/
    serving: ServingReport  # serving.json, with the ONNX export (None: none)
    seconds: float

    @property
    def onnx(self) -> Path | None:
        return self.directory / "model.onnx" if self.serving.onnx is not None else None

    def files(self) -> dict[str, Path]:
        """What the version keeps, by its path inside the version directory."""
        kept = {f"serving/{name}": self.directory / name for name in GATE_FILES}
        if self.onnx is not None:
            kept["model.onnx"] = self.onnx
        scoring = self.serving.scoring
        if scoring:  # runner.serving.scoring.gate: the script (and its sample request) as the gate ran them
            from runner.serving.scoring.release import kept_files

            for name in kept_files(scoring):  # what a release of the version publishes, too
                kept[f"scoring/{name}"] = self.directory / "scoring" / name
        return kept


def run_gate(
    loaded: LoadedManifest, paths: RunPaths, probe: Probe, env: Environment, logger: Logger
) -> GateResult | None:
    """None when the gate is off, or (gate: auto) when model.path holds files that are no model
    the gate knows; ModelGateError (one line: which check failed) when the model fails, and before
    anything is loaded when a link would make the gate read what registration does not hold."""
    spec = loaded.manifest.model
    if spec.gate == "off":
        return None
    model_path = paths.workdir / spec.path
    links = model_links(paths.workdir, paths.outputs_dir, spec.path)
    refuse_leaving(links, paths.workdir)
    located = locate(model_path)
    refuse_read_through(links, model_path, located, paths.workdir)
    if located is None and spec.serving.scoring_script:
        raise ModelGateError(
            f"model.path {spec.path} holds no model the gate knows ({KNOWN}): a scoring script is registered only"
            " with one"
        )
    if located is None:
        return _unidentified(spec, f"model.path {spec.path} holds no model the gate knows ({KNOWN})", logger)
    started = time.monotonic()
    out = paths.serving
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sample = loaded.source_dir / spec.sample_input if spec.sample_input else None
    args = ["check", str(model_path), str(out)] + (
        ["--sample", str(paths.workdir / spec.sample_input)] if sample else []
    )
    where = _probe(probe, env, paths, args, out / "check.log", loaded, logger)
    result = verdict(out, "check", out / "check.log")
    error = printable(str(result.get("error")))  # it names the model's files: any name a script chose
    if result.get("unknown"):
        return _unidentified(spec, f"model.path {spec.path}: {error}", logger)
    if not result.get("ok"):
        raise ModelGateError(f"model {spec.path}: {error} (the gate, in {where}; log: {out / 'check.log'})")
    serving = replace(ServingReport.read(out / "serving.json"), checked_in=where)
    serving = replace(
        serving, onnx=export_onnx(loaded, paths, serving.tensorflow, logger) if "onnx" in spec.export else None
    )
    if spec.serving.scoring_script:
        from runner.serving.scoring.gate import gate_scoring

        scoring = gate_scoring(
            loaded, paths, out, lambda args, log: _probe(probe, env, paths, args, log, loaded, logger), logger
        )
        serving = replace(serving, scoring=scoring)
    (out / "serving.json").write_text(json.dumps(serving.as_json(), indent=2, sort_keys=True) + "\n")
    seconds = time.monotonic() - started
    outputs = ", ".join(f"{name} {prediction.shape}" for name, prediction in serving.predictions.items())
    logger.info(
        f"model gate: {serving.format} loads in TensorFlow {serving.tensorflow}, signature {serving.signature!r}, "
        f"sample ({serving.sample}) → {outputs} [{seconds:.1f} s]"
    )
    return GateResult(out, serving, seconds)


def _unidentified(spec: ModelSpec, what: str, logger: Logger) -> None:
    """Files that are no model the gate knows: registered with a warning saying what was not
    checked (a migration keeps working), unless the manifest asks for the gate or an export."""
    if spec.gate == "required":
        raise ModelGateError(f"{what} (model.gate: required)")
    if spec.export_required:
        raise ModelGateError(f"{what}: nothing to export (model.export_required: true)")
    unchecked = "it was not loaded, no signature read, no prediction made" + (
        ", no model.onnx exported" if spec.export else ""
    )
    logger.warning(
        f"{what}: registered without the load-and-predict check ({unchecked}; model.gate: off silences this)"
    )
    return None


def gate_finished(loaded: LoadedManifest, home: Path, run_id: str, logger: Logger) -> GateResult | None:
    """The gate for a run that has ended (a sweep's best trial, registered when the sweep ends): in
    the interpreter the run trained with where that is on this machine, else the gate's own
    environment of the model's TensorFlow release."""
    import yaml

    from runner.serving.check_process import run_probe

    paths = RunPaths.for_run(home, run_id, loaded.manifest)
    try:
        environment = (yaml.safe_load(paths.lock.read_text()) or {}).get("environment") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        environment = {}
    python = environment.get("python")
    here = isinstance(python, str) and not environment.get("image") and Path(python).is_file()
    env = Environment(
        python if here else "python", environment.get("description") or f"the environment of {run_id}", True, True
    )

    def probe(args: list[str], log: Path, timeout: float) -> int | None | bool:
        return run_probe(python, args, paths.link_runner(), log, timeout) if here else False

    return run_gate(loaded, paths, probe, env, logger)


def _probe(
    probe: Probe, env: Environment, paths: RunPaths, args: list[str], log: Path, loaded: LoadedManifest, logger: Logger
) -> str:
    """Run the check in the run's environment; where that is not on this machine (pool hosts, a
    cluster), in a cached virtualenv of the model's TensorFlow release. Says where it ran."""
    status = probe(args, log, PROBE_SECONDS) if probe is not None else False
    if status is not False:
        ran(status, log)
        return env.description
    requirements = serving_requirements(_framework(loaded))[1:]  # TensorFlow alone
    python, described = cached_env(requirements, framework_constraints(_framework(loaded)), paths, logger)
    from runner.serving.check_process import run_probe

    ran(run_probe(python, args, paths.link_runner(), log, PROBE_SECONDS), log)
    return described


def _framework(loaded: LoadedManifest) -> str | None:
    return loaded.manifest.model.framework_version or loaded.manifest.framework_version
