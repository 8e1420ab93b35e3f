"""What the gate runs in a fresh process of the model's environment (`python -m runner.serving.model_check`).

    probe check  MODEL_PATH OUT_DIR [--sample FILE]   load, read the signatures, predict on the sample
    probe export MODEL_PATH OUT_DIR --opset N          convert to ONNX and run it in ONNX Runtime
    probe warm                                         import TensorFlow, then read a check's arguments from stdin
    probe score SCRIPT MODEL_PATH OUT_DIR --name NAME [--sample FILE]   a scoring script's init() and run()

`check` writes OUT_DIR/serving.json, sample.npz (the inputs) and predictions.npz (TensorFlow's
outputs); `export` (in the export environment, after `check`) writes model.onnx and export.json.
Each writes its verdict to OUT_DIR/<step>-result.json — {"ok": true} or {"ok": false, "error":
one line}, with "unknown": true where the files are no model the gate knows (not a failure under
`gate: auto`) — and leaves with os._exit: TensorFlow's interpreter teardown costs up to a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported: its C++ chatter is no result


def check(model_path: Path, out: Path, sample: Path | None) -> dict:
    import numpy as np

    from runner.serving import modelio
    from runner.serving.signature import locate, signatures_as_json

    located = locate(model_path)
    if located is None:
        return {
            "ok": False,
            "step": "identify",
            "unknown": True,
            "error": f"{model_path.name} holds no model the gate knows",
        }
    started = time.perf_counter()
    try:
        model = modelio.TensorFlowModel(located)
    except modelio.NotAModel as exc:  # not a failed load: gate: auto registers it with a warning
        return {"ok": False, "step": "identify", "unknown": True, "error": str(exc)}
    except modelio.LoadError as exc:
        return {"ok": False, "step": "load", "error": str(exc)}
    import tensorflow as tf

    loaded_in = time.perf_counter() - started
    signature = model.default_signature()
    try:
        inputs = modelio.load_sample(sample, signature) if sample else modelio.synthesize(signature)
    except modelio.InputError as exc:
        return {"ok": False, "step": "sample", "error": f"model.sample_input {exc}"}
    try:
        outputs = model.predict(inputs, signature.name)
    except Exception as exc:  # the model's own failure on its sample is the verdict
        return {
            "ok": False,
            "step": "predict",
            "error": f"the prediction on the sample failed: {type(exc).__name__}: {modelio._first_line(exc)}",
        }
    np.savez(out / "sample.npz", **inputs)
    np.savez(out / "predictions.npz", **outputs)
    serving = {
        "format": located.format.value,
        "path": located.relative,
        **({"weights": located.weights.name} if located.weights is not None else {}),
        "signatures": signatures_as_json(model.signatures),
        "signature": signature.name,
        "tensorflow": tf.__version__,
        "sample": "model.sample_input" if sample else "synthesised from the signature",
        "predictions": {
            name: {"shape": list(value.shape), "dtype": str(value.dtype)} for name, value in sorted(outputs.items())
        },
        "load_seconds": round(loaded_in, 3),
    }
    (out / "serving.json").write_text(json.dumps(serving, indent=2, sort_keys=True) + "\n")
    model.close()
    return {"ok": True}


def export(model_path: Path, out: Path, opset: int) -> dict:
    """tf2onnx from the SavedModel's serving signature (a Keras file exported first), then ONNX
    Runtime on the gate's sample, compared with TensorFlow's predictions."""
    import numpy as np
    import onnx
    import tensorflow as tf
    import tf2onnx

    from runner.serving import modelio
    from runner.serving.signature import locate

    serving = json.loads((out / "serving.json").read_text())
    try:
        model = modelio.TensorFlowModel(locate(model_path))
    except modelio.LoadError as exc:
        return {"ok": False, "step": "load", "error": f"{exc} (TensorFlow {tf.__version__}, the export environment)"}
    function = model._loaded.signatures[serving["signature"]]
    _, specs = function.structured_input_signature
    names = sorted(specs)

    @tf.function
    def call(*args):
        return function(**dict(zip(names, args)))

    signature = [tf.TensorSpec(specs[name].shape, specs[name].dtype, name=name) for name in names]
    target = out / "model.onnx"
    try:
        proto, _ = tf2onnx.convert.from_function(call, input_signature=signature, opset=opset, output_path=str(target))
    except Exception as exc:
        return {
            "ok": False,
            "step": "convert",
            "error": f"tf2onnx cannot convert the model: {type(exc).__name__}: {modelio._first_line(exc)}",
        }
    unsupported = sorted({node.op_type for node in proto.graph.node if not onnx.defs.has(node.op_type, node.domain)})
    if unsupported:
        target.unlink(missing_ok=True)
        return {
            "ok": False,
            "step": "convert",
            "unsupported": unsupported,
            "error": f"tf2onnx cannot convert the op{'s' if len(unsupported) > 1 else ''} {', '.join(unsupported)}",
        }
    try:
        onnx_model = modelio.OnnxModel(target)
    except modelio.LoadError as exc:
        return {"ok": False, "step": "verify", "error": str(exc)}
    with np.load(out / "sample.npz") as sample, np.load(out / "predictions.npz") as expected:
        inputs = {name: sample[name] for name in sample.files}
        reference = {name: expected[name] for name in expected.files}
    try:
        produced = onnx_model.predict(inputs)
    except Exception as exc:
        return {
            "ok": False,
            "step": "verify",
            "error": f"ONNX Runtime cannot run the sample: {modelio._first_line(exc)}",
        }
    difference = modelio.max_abs_difference(reference, produced)
    missing = sorted(reference.keys() - produced.keys())
    info = {
        "file": target.name,
        "opset": opset,
        "max_abs_diff": difference,
        "tensorflow": tf.__version__,
        "converter": f"tf2onnx {tf2onnx.__version__}",
        "outputs_missing": missing,
    }
    (out / "export.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    model.close()
    return {"ok": True}


def warm() -> list[str] | None:
    """Import what a check needs, then wait for its arguments (one JSON list on stdin); None when
    stdin closes first (the run did not complete: nothing to check)."""
    import importlib

    for name in ("numpy", "tensorflow", "keras", "runner.serving.modelio"):
        importlib.import_module(name)
    line = sys.stdin.readline()
    return json.loads(line) if line.strip() else None


def main(argv: list[str]) -> int:
    if argv == ["warm"]:  # started with the training, at low priority: the import is done when it ends
        argv = warm()
        if argv is None:
            os._exit(0)
    parser = argparse.ArgumentParser(prog="python -m runner.serving.model_check")
    sub = parser.add_subparsers(dest="step", required=True)
    checking = sub.add_parser("check")
    checking.add_argument("model", type=Path)
    checking.add_argument("out", type=Path)
    checking.add_argument("--sample", type=Path)
    exporting = sub.add_parser("export")
    exporting.add_argument("model", type=Path)
    exporting.add_argument("out", type=Path)
    exporting.add_argument("--opset", type=int, default=15)
    scoring = sub.add_parser("score")
    scoring.add_argument("script", type=Path)
    scoring.add_argument("model", type=Path)
    scoring.add_argument("out", type=Path)
    scoring.add_argument("--name", required=True)
    scoring.add_argument("--sample", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.step == "score":
            from runner.serving.scoring.check import check_script

            result = check_script(args.script, args.model, args.out, args.name, args.sample)
        else:
            result = (
                check(args.model, args.out, args.sample)
                if args.step == "check"
                else export(args.model, args.out, args.opset)
            )
    except Exception as exc:  # anything else: one line for tftrain, the traceback in the log
        import traceback

        traceback.print_exc()
        result = {"ok": False, "step": args.step, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    (args.out / f"{args.step}-result.json").write_text(json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
