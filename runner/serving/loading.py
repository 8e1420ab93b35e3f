"""The model server's start: the version's model loaded for its runtime (TensorFlow or ONNX Runtime), and
its sample predicted and compared with the predictions the gate recorded, before the port opens."""

from __future__ import annotations

import numpy as np

from runner.serving import modelio
from runner.serving.layout import Runtime, VersionDir
from runner.serving.modelio import LoadError
from runner.serving.signature import Signature

TENSORFLOW_TOLERANCE = 1e-5


ONNX_TOLERANCE = 1e-4


def load_model(directory: VersionDir, runtime: Runtime):
    """modelio's TensorFlowModel or OnnxModel of the version; LoadError saying why not."""
    serving = directory.serving() or {}
    if runtime is Runtime.ONNX:
        if not directory.onnx.is_file():
            raise LoadError(
                "the version has no model.onnx (register it with onnx export on, or serve with --runtime tensorflow)"
            )
        return modelio.OnnxModel(directory.onnx, serving.get("signature") or modelio.SERVING_DEFAULT)
    located = directory.located()
    if located is None:
        raise LoadError("model/ holds no SavedModel, .keras or .h5 file")
    return modelio.TensorFlowModel(located)


def check_sample(model, directory: VersionDir, signature: Signature) -> str:
    """Predict on the sample and compare with the recorded predictions; LoadError if they differ.
    Returns what was checked, for the log."""
    sample = (
        modelio.load_sample(directory.sample, signature)
        if directory.sample.is_file()
        else modelio.synthesize(signature)
    )
    outputs = model.predict(sample, signature.name)
    if not directory.predictions.is_file():
        return (
            f"sample prediction ok ({'serving/sample.npz' if directory.sample.is_file() else 'a made-up input'};"
            " nothing recorded to compare)"
        )
    with np.load(directory.predictions, allow_pickle=False) as archive:
        expected = {name: archive[name] for name in archive.files}
    common = outputs.keys() & expected.keys()
    if not common:
        raise LoadError(
            f"the outputs {sorted(outputs)} are not those recorded in serving/predictions.npz {sorted(expected)}"
        )
    tolerance = TENSORFLOW_TOLERANCE
    if model.runtime == Runtime.ONNX.value:
        recorded = ((directory.serving() or {}).get("onnx") or {}).get("max_abs_diff")
        tolerance = max(ONNX_TOLERANCE, float(recorded)) if isinstance(recorded, (int, float)) else ONNX_TOLERANCE
    difference = modelio.max_abs_difference(outputs, expected)
    if difference > tolerance:
        raise LoadError(
            f"the sample's predictions differ from the recorded ones by {difference:.3g} (tolerance {tolerance:g})"
        )
    return f"sample prediction matches serving/predictions.npz (max abs diff {difference:.3g} ≤ {tolerance:g})"
