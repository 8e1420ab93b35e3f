"""Serving: a registered model as a function and a service (the gate before registration, serve, deploy); the ONNX export is runner.export's."""
