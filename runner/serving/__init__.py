"""Serving: a registered model as a function and a service (the gate, ONNX export, serve, deploy)."""
