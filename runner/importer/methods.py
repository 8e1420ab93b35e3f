"""Methods of Azure ML SDK objects, as the static reading sees them (interp.Interpreter.call)."""

from __future__ import annotations

import ast
from typing import Any

from runner.importer.values import Obj, Unknown

PACKAGE_METHODS = {"add_pip_package": "pip_packages", "add_conda_package": "conda_packages", "add_channel": "channels"}
DATA = ("datastore", "datapath", "dataset")


def call_method(interp, obj: Obj, method: str, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
    line = node.lineno

    def params(*names: str) -> dict[str, Any]:
        return {**dict(zip(names, args)), **kwargs}

    if method == "submit":
        config = params("config").get("config")
        if isinstance(config, Obj):
            interp.submitted.append((config, obj, line))
        return Obj("run", line, {"experiment": obj}, node)
    if obj.kind == "run" and method == "get_best_run_by_primary_metric":
        return Obj("run", line, {"experiment": obj.attrs.get("experiment")}, node)  # a HyperDrive run's best trial
    if method == "register_model":
        registration = Obj("registration", line, {**params("model_name", "model_path"), "_via": "register_model"}, node)
        interp.registrations.append(registration)
        return registration
    if method in PACKAGE_METHODS:
        key = PACKAGE_METHODS[method]
        if not isinstance(obj.attrs.get(key), list):
            obj.attrs[key] = []
        obj.attrs[key].append(args[0] if args else Unknown(node))
        interp.budget.admit(obj.attrs[key], line)  # the list may be the script's own (even the argument)
        return None
    if obj.kind == "workspace" and method == "get_default_datastore":
        return Obj("datastore", line, {"name": "workspaceblobstore", "default": True}, node)
    if obj.kind == "datastore" and method == "path":
        return Obj("datapath", line, {"datastore": obj, "path_on_datastore": params("path").get("path")}, node)
    if obj.kind == "datastore" and method in ("upload", "upload_files"):
        found = (
            params("src_dir", "target_path") if method == "upload" else params("files", "relative_root", "target_path")
        )
        local = found.get("src_dir", found.get("files"))
        interp.uploads.append((obj.attrs.get("name"), found.get("target_path", ""), local, line))
        return Unknown(node)
    if obj.kind in DATA and method in ("as_mount", "as_download"):
        mode = "mount" if method == "as_mount" else "download"
        return Obj("data_input", line, {"source": obj, "mode": mode, **params("path_on_compute")}, node)
    if obj.kind == "dataset" and method in ("as_named_input", "register"):
        named = params("name") if method == "as_named_input" else params("workspace", "name")
        key = "input_name" if method == "as_named_input" else "name"
        return Obj("dataset", line, {**obj.attrs, key: named.get("name")}, obj.node)
    if obj.kind == "output" and method in ("as_upload", "as_mount", "register_on_complete", "read_delimited_files"):
        return obj
    return Unknown(node)
