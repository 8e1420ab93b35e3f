from __future__ import annotations

import json
import textwrap

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.manifest.model import MpiTraining, ParameterServerTraining
from runner.manifest.schema import json_schema


def manifest_error(project, manifest: str) -> str:
    path = project(manifest=manifest)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    return str(info.value)


def test_valid_manifest_loads_with_defaults(project):
    loaded = load_manifest(project(manifest="script_params:\n  --epochs: 3\n"))
    assert loaded.manifest.name == "demo"
    assert loaded.manifest.outputs_dir == "outputs"
    assert loaded.manifest.model.path == "outputs/model"
    assert loaded.warnings == ()


def test_unknown_key_names_line_and_suggests(project):
    message = manifest_error(project, "script_parms:\n  --epochs: 3\n")
    assert message == f"{project().parent / 'tftrain.yml'}:4: script_parms: unknown key; did you mean 'script_params'?"


def test_missing_required_key(project, tmp_path):
    path = tmp_path / "m.yml"
    path.write_text("name: x\n")
    with pytest.raises(ManifestError, match=r"m.yml:1: entry_script: required key is missing"):
        load_manifest(path)


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "m.yml"
    path.write_text("name: x\nentry_script: [unclosed\n")
    with pytest.raises(ManifestError, match=r"m.yml:\d+: entry_script: invalid YAML"):
        load_manifest(path)


def test_missing_manifest_file(tmp_path):
    with pytest.raises(ManifestError, match="manifest not found"):
        load_manifest(tmp_path / "nope.yml")


def test_entry_script_must_exist(tmp_path):
    (tmp_path / "src").mkdir()
    path = tmp_path / "tftrain.yml"
    path.write_text("name: x\nsource_directory: src\nentry_script: missing.py\n")
    with pytest.raises(ManifestError, match=r"tftrain.yml:3: entry_script: 'missing.py' not found in source_directory"):
        load_manifest(path)


def test_entry_script_cannot_leave_source_directory(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "evil.py").write_text("")
    path = tmp_path / "tftrain.yml"
    path.write_text("name: x\nsource_directory: src\nentry_script: ../evil.py\n")
    with pytest.raises(ManifestError, match="entry_script: '../evil.py' must be a relative path that stays inside"):
        load_manifest(path)


def test_parameter_server_capacity(project):
    message = manifest_error(
        project,
        "node_count: 1\ncompute:\n  slots_per_node: 2\n"
        "distributed_training:\n  backend: parameter_server\n  worker_count: 2\n  parameter_server_count: 1\n",
    )
    assert message.endswith(
        ":9: distributed_training.worker_count: worker_count + parameter_server_count = 3 exceed "
        "node_count (1) × compute.slots_per_node (2) = 2"
    )


@pytest.mark.parametrize(
    "nodes, workers, servers",
    [
        (1, 1, 1),  # 1 worker + 1 ps on one 2-CPU node: valid in Azure ML (the chief is not counted)
        (2, 2, 1),
    ],
)
def test_parameter_server_rule_as_the_estimator_states_it(project, nodes, workers, servers):
    manifest = (
        f"node_count: {nodes}\ncompute:\n  slots_per_node: 2\ndistributed_training:\n  backend: parameter_server\n"
        f"  worker_count: {workers}\n  parameter_server_count: {servers}\n"
    )
    loaded = load_manifest(project(manifest=manifest))
    assert isinstance(loaded.manifest.distributed_training, ParameterServerTraining)


@pytest.mark.parametrize(
    "training",
    [
        "  backend: parameter_server\n  worker_count: 64\n  parameter_server_count: 8\n",
        "  backend: multi_worker_mirrored\n  worker_count: 64\n",
        "  backend: mpi\n  process_count_per_node: 64\n",
    ],
)
def test_validation_does_not_depend_on_this_machine(project, training):
    """Without compute.slots_per_node, validation checks no capacity (the machine's CPU count would
    make `tftrain validate` answer differently on a laptop and a runner); the run checks it."""
    loaded = load_manifest(project(manifest="distributed_training:\n" + training))
    assert loaded.manifest.distributed_training is not None


def test_mpi_more_processes_than_slots(project):
    message = manifest_error(
        project, "compute:\n  slots_per_node: 2\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 4\n"
    )
    assert "4 processes per node exceed the 2 slots per node (compute.slots_per_node)" in message


def test_deprecated_distributed_backend_migrates_with_warning(project):
    loaded = load_manifest(
        project(manifest="node_count: 2\ndistributed_backend: ps\nworker_count: 2\nparameter_server_count: 1\n")
    )
    training = loaded.manifest.distributed_training
    assert isinstance(training, ParameterServerTraining)
    assert (training.worker_count, training.parameter_server_count) == (2, 1)
    assert loaded.manifest.distributed_backend is None
    assert any(
        ":5: distributed_backend: distributed_backend is deprecated; write instead: "
        "distributed_training: {backend: parameter_server, worker_count: 2, parameter_server_count: 1}" in w
        for w in loaded.warnings
    )


def test_deprecated_mpi_backend(project):
    loaded = load_manifest(project(manifest="node_count: 2\nprocess_count_per_node: 1\ndistributed_backend: mpi\n"))
    assert loaded.manifest.distributed_training == MpiTraining(backend="mpi", process_count_per_node=1)


BAD_MANIFESTS = [  # (case, manifest lines after name/source_directory/entry_script, what the error says)
    (
        "unknown_nested_key_suggests_from_the_right_model",
        "metrics:\n  primry: accuracy\n",
        ":5: metrics.primry: unknown key; did you mean 'primary'?",
    ),
    ("wrong_type_names_field_and_line", "node_count: many\n", ":4: node_count: Input should be a valid integer"),
    ("script_param_error_names_the_flag", "script_params:\n  --lr: {inptu: data}\n", ":5: script_params.--lr"),
    ("counts_of_zero_are_refused", "node_count: 0\n", "node_count: Input should be greater than or equal to 1"),
    ("duplicate_key_is_an_error", "use_gpu: false\nname: other\n", ":5: name: duplicate key 'name'"),
    (
        "model_path_must_stay_in_outputs",
        "model:\n  path: elsewhere/model\n",
        ":5: model.path: 'elsewhere/model' must stay inside outputs_dir 'outputs'",
    ),
    (
        "backend_required_for_node_count",
        "node_count: 2\n",
        ":4: node_count: node_count > 1 needs a distributed backend",
    ),
    (
        "backend_required_for_process_count",
        "process_count_per_node: 2\n",
        "process_count_per_node > 1 needs a distributed backend",
    ),
    (
        "counts_without_backend_deprecated_form",
        "worker_count: 2\n",
        ":4: worker_count: a distributed backend is required",
    ),
    (
        "unknown_backend",
        "distributed_training:\n  backend: spark\n",
        ":5: distributed_training.backend: 'spark' is not one of 'mpi', 'parameter_server'",
    ),
    (
        "horovod_needs_a_compatible_framework",
        "framework_version: '2.21'\ndistributed_training:\n  backend: mpi\n",
        ":4: framework_version: Horovod (backend: mpi) builds against TensorFlow 2.15, 2.16, 2.17, 2.18 only, not 2.21",
    ),
    (
        "deprecated_and_new_conflict",
        "distributed_backend: mpi\ndistributed_training:\n  backend: mpi\n",
        "deprecated key conflicts with distributed_training",
    ),
    (
        "input_reference_must_exist",
        "script_params:\n  --data: {input: mnist}\n",
        ":5: script_params.--data.input: input 'mnist' is not in inputs (none defined)",
    ),
    (
        "resume_reference_needs_resume_from",
        "script_params:\n  --resume: {resume_from: true}\n",
        "references resume_from, which is not set",
    ),
    ("regex_must_compile", "metrics:\n  regex:\n    acc: 'acc: [0-9'\n", "acc: invalid regular expression"),
    ("regex_needs_a_capture_group", "metrics:\n  regex:\n    acc: 'acc: [0-9.]+'\n", "needs a capture group"),
    ("bad_environment_variable_name", "environment_variables:\n  1BAD: x\n", "not a valid environment variable name"),
    ("custom_image_needs_docker", "custom_docker_image: tf:latest\n", "custom_docker_image: needs use_docker: true"),
]


@pytest.mark.parametrize(("manifest", "expected"), [pytest.param(m, e, id=case) for case, m, e in BAD_MANIFESTS])
def test_a_bad_manifest_names_line_and_key(project, manifest, expected):
    assert expected in manifest_error(project, manifest)


def test_several_errors_are_all_reported(project):
    message = manifest_error(project, "use_gpuu: true\nnode_count: 0\n")
    assert len(message.splitlines()) == 2


def test_shipped_schema_is_current(repo):
    assert (repo / "tftrain.schema.json").read_text() == json_schema()


def test_schema_describes_the_manifest():
    schema = json.loads(json_schema())
    assert schema["additionalProperties"] is False
    assert {"name", "entry_script", "script_params", "distributed_training"} <= set(schema["properties"])


def test_example_manifest_is_valid(repo):
    loaded = load_manifest(repo / "examples" / "mnist-keras" / "tftrain.yml")
    assert loaded.manifest.metrics.primary == "test_accuracy"


def test_model_register_key(project):
    loaded = load_manifest(project(manifest=textwrap.dedent("model:\n  register: false\n")))
    assert loaded.manifest.model.register_model is False
