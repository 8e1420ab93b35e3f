"""`model.export: [onnx]`: once the gate has loaded the model, tf2onnx converts it in an export
environment of its own (a cached virtualenv of tf2onnx's TensorFlow range,
runner.frameworks.serving), and ONNX Runtime's outputs on the gate's sample are compared with
TensorFlow's within model.export_tolerance. It leaves model.onnx, export.json and export.log in
the run's serving/; a model that cannot be exported is registered without model.onnx (a
warning), unless `export_required: true` makes that the gate's failure."""

from __future__ import annotations

from runner.errors import FatalError, ModelGateError
from runner.frameworks.curated import major_minor
from runner.frameworks.serving import ONNX_OPSET, export_constraints, export_requirements
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.serving.gate_report import OnnxExport
from runner.serving.steps import PROBE_SECONDS, cached_env, ran, verdict
from runner.telemetry.logger import Logger


def export_onnx(loaded: LoadedManifest, paths: RunPaths, tensorflow: str, logger: Logger) -> OnnxExport | None:
    """model.onnx, converted and verified: export.json's contents; None (with a warning) when it
    cannot be, unless required. `tensorflow`: the release the gate loaded the model in (serving.json)."""
    spec = loaded.manifest.model
    out = paths.serving
    try:
        requirements = export_requirements(tensorflow)
        constraints = export_constraints(tensorflow)
        python, described = cached_env(requirements, constraints, paths, logger)
        from runner.serving.check_process import run_probe

        args = ["export", str(paths.workdir / spec.path), str(out), "--opset", str(ONNX_OPSET)]
        ran(run_probe(python, args, paths.link_runner(), out / "export.log", PROBE_SECONDS), out / "export.log")
        result = verdict(out, "export", out / "export.log")
        if not result.get("ok"):
            raise ModelGateError(f"ONNX export: {result.get('error')} (log: {out / 'export.log'})")
        info = OnnxExport.read(out / "export.json")
        if info.max_abs_diff > spec.export_tolerance or info.outputs_missing:
            missing = f"; outputs missing: {', '.join(info.outputs_missing)}" if info.outputs_missing else ""
            raise ModelGateError(
                f"ONNX export: ONNX Runtime's outputs differ from TensorFlow's by {info.max_abs_diff:.3g} on the sample"
                f" (model.export_tolerance: {spec.export_tolerance:g}){missing}"
            )
    except FatalError as exc:
        (out / "model.onnx").unlink(missing_ok=True)
        if spec.export_required:
            raise ModelGateError(f"{exc} (model.export_required: true)") from None
        logger.warning(f"{exc}; the model is registered without model.onnx")
        return None
    same = major_minor(info.tensorflow) == major_minor(tensorflow)
    logger.info(
        f"ONNX export: model.onnx (opset {info.opset}, {info.converter}, TensorFlow {info.tensorflow}"
        f"{'' if same else ' — the run used ' + tensorflow + ', outside tf2onnx’s range'} in {described}); "
        f"ONNX Runtime matches TensorFlow within {info.max_abs_diff:.2g}"
    )
    return info
