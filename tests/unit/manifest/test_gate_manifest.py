"""model.gate / sample_input / export / serving: each bad value one line naming the field."""

from __future__ import annotations

import pytest
from manifest_errors import one_line_error

from runner.manifest import load_manifest


@pytest.mark.parametrize(
    "manifest, error",
    [
        ("model:\n  export: [onxx]\n", "5: model.export[0]: 'onxx' is not one of 'onnx'; did you mean 'onnx'?"),
        (
            "model:\n  gate: requird\n",
            "5: model.gate: 'requird' is not one of 'auto', 'required' or 'off'; did you mean 'required'?",
        ),
        (
            "model:\n  gate: off\n  export: [onnx]\n",
            "6: model.export: model.export needs the gate: remove it or set model.gate to auto or required",
        ),
        ("model:\n  sample_input: data.csv\n", "5: model.sample_input: 'data.csv' must be a .npy, .npz or .json file"),
        ("model:\n  sample_input: ../outside.npy\n", "5: model.sample_input: '../outside.npy' leads outside"),
        ("model:\n  sample_input: missing.npy\n", "5: model.sample_input: 'missing.npy' not found in source_directory"),
        ("model:\n  export_tolerance: 0\n", "5: model.export_tolerance: Input should be greater than 0"),
        (
            "model:\n  serving: {memory: 2GB}\n",
            "5: model.serving.memory: '2GB' is not a Kubernetes quantity (e.g. 512Mi, 2Gi)",
        ),
        ("model:\n  serving: {cpu: 0}\n", "5: model.serving.cpu: Input should be greater than 0"),
        ("model:\n  serving: {gpus: 1}\n", "5: model.serving.gpus: unknown key; did you mean 'gpu'?"),
    ],
)
def test_bad_gate_settings_are_one_line(project, manifest, error):
    one_line_error(project, manifest, error)


def test_yaml_switches_name_the_gate_settings(project):
    assert load_manifest(project(manifest="model:\n  gate: off\n")).manifest.model.gate == "off"  # YAML 1.1's false
    assert load_manifest(project(manifest="model:\n  gate: yes\n")).manifest.model.gate == "required"
    spec = load_manifest(project(manifest="model:\n  serving: {cpu: 0.5, memory: 512Mi, gpu: 1}\n")).manifest.model
    assert (spec.gate, spec.export, spec.serving.cpu, spec.serving.memory, spec.serving.gpu) == (
        "auto",
        [],
        0.5,
        "512Mi",
        1,
    )
