"""Exports of a trained model into other formats, made during the run (after the gate's check,
before registration) and kept in the version: ONNX (`model.export: [onnx]`, runner.export.onnx)."""
