"""Serving: a registered model as a function and a service (the gate before registration, serve,
deploy). The ONNX export the gate calls is onnx_export.py."""
