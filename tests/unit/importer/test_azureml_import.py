"""tftrain import azureml: Azure ML jobs (SDK v1 .py/.ipynb, v2 YAML) → tftrain.yml, read and never run.

Every imported manifest must load with load_manifest once its training code is in place.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from runner.cli.main import main
from runner.manifest import load_manifest
from runner.manifest.fields import InputRef
from runner.manifest.model import MpiTraining, MultiWorkerMirroredTraining, ParameterServerTraining

DATA = REPO / "tests" / "data" / "azureml"


def imported(tmp_path: Path, fixture: str, *code: str, text: str | None = None):
    """Import tests/data/azureml/FIXTURE (or TEXT under that name) next to its training code CODE…;
    returns the loaded manifest, the manifest's text and the report."""
    source = tmp_path / fixture
    if text is None:
        shutil.copy(DATA / fixture, source)
    else:
        source.write_text(text)
    for relative in code:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("print('training')\n")
    output = tmp_path / "tftrain.yml"
    assert main(["import", "azureml", str(source), "-o", str(output)]) == 0
    loaded = load_manifest(output)
    # A job's own TensorFlow patch (tensorflow==2.16.1) is kept, without the release's tested set:
    # the manifest says so (tests/unit/environments/test_curated_sets.py), and that is all it says.
    assert [warning for warning in loaded.warnings if "tested" not in warning] == []
    return loaded.manifest, output.read_text(), (tmp_path / "tftrain-import-report.md").read_text()


def uncommented(text: str) -> str:
    return "\n".join(line.split("#")[0] for line in text.splitlines())


def test_single_node_tensorflow_estimator(tmp_path):
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    manifest, text, report = imported(tmp_path, "tf_single.py", "tf-mnist/tf_mnist.py")
    assert manifest.name == "tf-mnist"  # Experiment(workspace=ws, name=experiment_name)
    assert (manifest.source_directory, manifest.entry_script) == ("tf-mnist", "tf_mnist.py")  # os.path.join
    assert manifest.script_params == {
        "--data-folder": InputRef(input="data_folder"),
        "--batch-size": 64,
        "--first-layer-neurons": 256,
        "--learning-rate": 0.01,
        "--epochs": 10,
    }
    # ds.upload(src_dir='./data/mnist', target_path='mnist') then ds.path('mnist').as_mount()
    assert manifest.inputs["data_folder"].source == "data/mnist"
    assert manifest.inputs["data_folder"].mode == "mount"
    assert manifest.pip_packages == ["pillow"]  # azureml-defaults left out: compat routes the Run API
    assert manifest.conda_packages == ["scikit-learn"]
    assert manifest.use_gpu is True and manifest.use_docker is False
    assert manifest.framework_version == "2.18"
    assert "framework_version: \"2.18\"  # was '2.0' in Azure ML" in text
    assert manifest.max_run_duration_seconds == 3600
    assert manifest.compat == "azureml"
    assert manifest.model.path == "outputs/model"  # run.register_model(model_path='outputs/model')
    assert "compute target 'gpu-cluster' → choose runner labels (compute.runner_labels) or a pool" in report
    assert "its jobs used a GPU" in report
    # low priority: preempted or lost runs resume from their checkpoint, on preemptible runners
    assert (
        manifest.retry is not None and manifest.retry.max_attempts == 3 and manifest.retry.on == ["preempted", "lost"]
    )
    assert manifest.compute.runner_labels == ["preemptible"]
    assert "vm_priority='lowpriority' → retry: {max_attempts: 3, on: [preempted, lost]}" in report
    assert "vm_priority='lowpriority': no equivalent" not in report
    assert "'2.0' → '2.18': tftrain supports TensorFlow " in report
    assert text.index("name:") < text.index("source_directory:") < text.index("script_params:") < text.index("compat:")


def test_datastore_without_a_local_copy_is_a_placeholder_that_validates(tmp_path):
    manifest, text, report = imported(tmp_path, "tf_single.py", "tf-mnist/tf_mnist.py")
    assert manifest.inputs["data_folder"].source == "s3://TODO/workspaceblobstore/mnist"
    assert (
        "TODO(tftrain import): was datastore 'workspaceblobstore' path 'mnist', uploaded from './data/mnist' "
        "(not found); copy it to S3/https or a local path" in text
    )
    assert "inputs.data_folder.source: was datastore 'workspaceblobstore'" in report


def test_horovod_estimator_with_mpi_configuration(tmp_path):
    manifest, _text, report = imported(tmp_path, "tf_horovod.py", "tf-distr-hvd/tf_horovod_word2vec.py")
    assert manifest.node_count == 2
    assert manifest.distributed_training == MpiTraining(backend="mpi", process_count_per_node=1)
    assert manifest.process_count_per_node is None
    assert manifest.framework_version == "2.18"  # Horovod here builds against 2.15–2.18 only
    assert "'1.13' → '2.18': Horovod (backend: mpi) builds against TensorFlow 2.15–2.18 only" in report
    assert "TF 1.x code" in report
    assert manifest.environment_variables == {"NCCL_DEBUG": "INFO"}
    assert manifest.source_directory == "tf-distr-hvd"  # the positional source_directory
    assert manifest.name == "tf-distr-hvd"


@pytest.mark.parametrize("fixture", ["tf_ps.py", "tf_ps_dnn.py"])
def test_parameter_server(tmp_path, fixture):
    manifest, _text, report = imported(tmp_path, fixture, "tf-distr-ps/tf_mnist_replica.py")
    assert manifest.node_count == 2
    training = manifest.distributed_training
    assert isinstance(training, ParameterServerTraining)
    assert (training.worker_count, training.parameter_server_count) == (2, 1)
    assert "chief: false" in report


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("tf_legacy_mpi.py", MpiTraining(backend="mpi", process_count_per_node=2)),
        (
            "tf_legacy_ps.py",
            ParameterServerTraining(backend="parameter_server", worker_count=2, parameter_server_count=1),
        ),
    ],
)
def test_deprecated_distributed_backend_becomes_distributed_training(tmp_path, fixture, expected):
    manifest, text, report = imported(tmp_path, fixture, "src/train.py")
    assert manifest.distributed_training == expected
    assert manifest.node_count == 2
    for deprecated in (
        "distributed_backend",
        "worker_count:\n",
        "parameter_server_count:\n",
        "process_count_per_node: 2\nd",
    ):
        assert not any(line.startswith(deprecated) for line in text.splitlines())
    assert "(deprecated) → distributed_training" in report
    assert manifest.name == fixture.removesuffix(".py")


def test_script_run_config_with_mpi_and_a_dataset_mount(tmp_path):
    manifest, _text, report = imported(tmp_path, "src_mpi.py", "scripts/train_hvd.py")
    assert manifest.name == "keras-horovod"
    assert (manifest.source_directory, manifest.entry_script) == ("scripts", "train_hvd.py")
    assert manifest.node_count == 2
    assert manifest.distributed_training == MpiTraining(backend="mpi", process_count_per_node=2)
    # arguments=['--data-dir', dataset.as_named_input('mnist').as_mount(), '--epochs', 5, '--verbose']
    assert manifest.script_params == {"--data-dir": InputRef(input="mnist"), "--epochs": 5, "--verbose": True}
    assert manifest.inputs["mnist"].source.startswith("https://azureopendatasets.blob.core.windows.net/mnist/")
    assert manifest.inputs["mnist"].mode == "mount"
    assert manifest.use_docker is True
    assert manifest.custom_docker_image.startswith("mcr.microsoft.com/azureml/openmpi")
    # tensorflow-gpu==2.4.1 → framework_version (then 2.18 for Horovod); horovod is tftrain's own
    assert manifest.pip_packages == []
    assert manifest.conda_packages == ["pandas"]  # cd.add_conda_package('pandas')
    assert manifest.use_gpu is True and manifest.framework_version == "2.18"
    assert manifest.environment_variables == {"TF_CPP_MIN_LOG_LEVEL": "2"}
    assert "horovod left out" in report and "'tensorflow-gpu==2.4.1' → framework_version" in report


def test_notebook_code_cells_without_magics(tmp_path):
    manifest, text, report = imported(tmp_path, "notebook.ipynb", "keras-mnist/keras_mnist.py")
    assert manifest.name == "Keras-MNIST"  # 'Keras MNIST', made a valid name
    assert (manifest.source_directory, manifest.entry_script) == ("keras-mnist", "keras_mnist.py")
    assert manifest.script_params == {"--batch-size": 50, "--epochs": 20}
    assert manifest.use_gpu is True  # the curated AzureML-TensorFlow-2.3-GPU environment
    assert manifest.framework_version == "2.18"
    assert "(notebook.ipynb:cell 5:1)" in report  # Environment.get(...): cell 5, its first line
    assert "from ScriptRunConfig(...) at notebook.ipynb:cell 6:1" in text


def test_v2_command_job_with_mpi(tmp_path):
    manifest, text, report = imported(tmp_path, "job_mpi.yml", "src/train.py")
    assert manifest.name == "tf-mnist-horovod"
    assert (manifest.source_directory, manifest.entry_script) == ("src", "train.py")
    assert manifest.script_params == {
        "--epochs": 5,
        "--data-dir": InputRef(input="mnist"),
        "--model-dir": "outputs/model",
    }  # [--seed ${{inputs.seed}}] is optional and seed is not an input: left out
    assert manifest.inputs["mnist"].source == "s3://TODO/workspaceblobstore/mnist"
    assert manifest.inputs["mnist"].mode == "mount"
    assert "# TODO(tftrain import): was datastore 'workspaceblobstore' path 'mnist'" in text
    assert manifest.node_count == 2
    assert manifest.distributed_training == MpiTraining(backend="mpi", process_count_per_node=2)
    assert manifest.framework_version == "2.16" and manifest.use_gpu is True
    assert manifest.max_run_duration_seconds == 7200
    assert manifest.model.path == "outputs/model"
    assert "compute target 'gpu-cluster'" in report
    assert "command part 'pip list'" in report


def test_v2_command_job_with_tensorflow_distribution(tmp_path):
    manifest, _text, _report = imported(tmp_path, "job_tensorflow.yml", "src/train.py")
    assert manifest.node_count == 2
    assert manifest.distributed_training == ParameterServerTraining(
        backend="parameter_server", worker_count=2, parameter_server_count=1
    )
    assert manifest.script_params == {"--steps": 100, "--data": InputRef(input="data")}
    assert manifest.inputs["data"].source.startswith("https://storage.googleapis.com/")
    assert manifest.framework_version == "2.16.1"  # from the inline conda file's tensorflow==2.16.1
    assert manifest.pip_packages == ["pandas"] and manifest.conda_packages == []
    assert manifest.custom_docker_image == "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04" and manifest.use_docker
    assert manifest.environment_variables == {"TF_CPP_MIN_LOG_LEVEL": "2"}


def test_v2_tensorflow_distribution_without_parameter_servers_is_multi_worker(tmp_path):
    job = (
        "command: python train.py\ncode: .\nresources: {instance_count: 2}\ndistribution: {type: tensorflow,"
        " worker_count: 2}\n"
    )
    manifest, _text, _report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.distributed_training == MultiWorkerMirroredTraining(backend="multi_worker_mirrored", worker_count=2)
    assert manifest.name == "job"


@pytest.mark.parametrize("tier", ["spot", "low_priority"])
def test_v2_spot_tier_retries_on_preemptible_runners(tmp_path, tier):
    job = f"command: python train.py\ncode: .\nqueue_settings:\n  job_tier: {tier}\n  priority: medium\n"
    manifest, text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert (
        manifest.retry is not None and manifest.retry.max_attempts == 3 and manifest.retry.on == ["preempted", "lost"]
    )
    assert manifest.compute.runner_labels == ["preemptible"]
    assert (
        f"queue_settings.job_tier='{tier}' → retry: {{max_attempts: 3, on: [preempted, lost]}} on runners labelled"
        " 'preemptible'" in report
    )
    assert "(job.yml:4)" in report and "queue_settings.priority: no equivalent in tftrain (job.yml:5)" in report
    assert "queue_settings: no equivalent" not in report


def test_v2_dedicated_tier_is_not_retried(tmp_path):
    job = "command: python train.py\ncode: .\nqueue_settings: {job_tier: standard}\n"
    manifest, _text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.retry is None and "preemptible" not in (manifest.compute.runner_labels or [])
    assert "queue_settings.job_tier='standard': runs are not retried unless retry: is set" in report


def test_v2_queue_settings_that_are_no_mapping_are_reported(tmp_path):
    _manifest, _text, report = imported(
        tmp_path, "job.yml", "train.py", text="command: python train.py\ncode: .\nqueue_settings: spot\n"
    )
    assert "queue_settings: 'spot' is not a mapping (job_tier, priority) (job.yml:3)" in report


def test_unresolved_values_become_todo_comments_and_report_lines(tmp_path):
    manifest, text, report = imported(tmp_path, "unresolved.py", "train.py")
    assert "  # --learning-rate:  # TODO(tftrain import): learning_rate() at unresolved.py:15" in text.splitlines()
    assert '# framework_version:  # TODO(tftrain import): ws.tags["tf"] at unresolved.py:17' in text.splitlines()
    assert "pip_packages: [pillow]  # TODO(tftrain import): sys.argv[2] at unresolved.py:16" in text.splitlines()
    assert manifest.script_params == {"--epochs": 3}
    assert manifest.framework_version is None
    assert "script_params.--learning-rate: not resolved statically: learning_rate() (unresolved.py:15)" in report
    assert 'framework_version: not resolved statically: ws.tags["tf"] (unresolved.py:17)' in report
    assert yaml.safe_load(text)["name"] == "tuned"


def test_the_input_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    script = (
        f"open({str(marker)!r}, 'w').close()\nimport azureml_not_installed_anywhere\n"
        "from azureml.train.dnn import TensorFlow\nTensorFlow('.', entry_script='train.py')\n"
    )
    manifest, _text, _report = imported(tmp_path, "job.py", "train.py", text=script)
    assert not marker.exists()
    assert manifest.entry_script == "train.py"


def test_the_one_submitted_is_imported_and_the_others_reported(tmp_path):
    script = (
        "from azureml.core import Experiment, ScriptRunConfig\n"
        "a = ScriptRunConfig('.', 'train.py', arguments=['--n', 1])\n"
        "b = ScriptRunConfig('.', 'train.py', arguments=['--n', 2])\n"
        "Experiment(ws, 'pick').submit(a)\n"
    )
    manifest, _text, report = imported(tmp_path, "job.py", "train.py", text=script)
    assert manifest.script_params == {"--n": 1}
    assert "another ScriptRunConfig(...): not imported (one job per manifest) (job.py:3)" in report


def test_missing_entry_script_is_reported_not_fatal(tmp_path, cli):
    shutil.copy(DATA / "tf_legacy_ps.py", tmp_path)
    result = cli("import", "azureml", "tf_legacy_ps.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = (tmp_path / "tftrain-import-report.md").read_text()
    assert "tftrain validate: " in report and "source_directory" in report
    assert "wrote tftrain.yml from TensorFlow(...) at tf_legacy_ps.py:3" in result.stdout


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("no_job.py", "no_job.py: no Azure ML TensorFlow(...), Estimator(...) or ScriptRunConfig(...) found"),
        ("syntax_error.py", "syntax_error.py:3: invalid Python: '(' was never closed"),
        ("missing.py", "missing.py: no such file"),
    ],
)
def test_bad_inputs_are_one_line_manifest_errors(tmp_path, cli, fixture, message):
    if (DATA / fixture).exists():
        shutil.copy(DATA / fixture, tmp_path)
    result = cli("import", "azureml", fixture, cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr == f"tftrain: error: {message}\n"
    assert not (tmp_path / "tftrain.yml").exists()


def test_a_notebook_syntax_error_names_the_cell(tmp_path, cli):
    notebook = json.loads((DATA / "notebook.ipynb").read_text())
    notebook["cells"][4]["source"] = ["x = 1\n", "y = (2,\n"]
    (tmp_path / "bad.ipynb").write_text(json.dumps(notebook))
    result = cli("import", "azureml", "bad.ipynb", cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr.startswith("tftrain: error: bad.ipynb:cell 5:2: invalid Python:")


def test_refuses_to_overwrite_without_force(tmp_path, cli):
    shutil.copy(DATA / "tf_legacy_mpi.py", tmp_path)
    (tmp_path / "tftrain.yml").write_text("mine\n")
    result = cli("import", "azureml", "tf_legacy_mpi.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "tftrain: error: tftrain.yml: exists; give --force to overwrite it, or another -o\n"
    assert (tmp_path / "tftrain.yml").read_text() == "mine\n"
    result = cli("import", "azureml", "tf_legacy_mpi.py", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "distributed_training:" in (tmp_path / "tftrain.yml").read_text()


def test_expressions_too_big_to_compute_are_left_as_todos(tmp_path):
    """The importer computes simple arithmetic; a file must not make it hang or fill memory."""
    import ast

    from runner.importer.interp import _small

    assert _small(ast.Pow(), 2, 10) and not _small(ast.Pow(), 9, 9**9) and not _small(ast.Pow(), 10**9, 2)
    assert _small(ast.Mult(), "ab", 3) and not _small(ast.Mult(), "x", 10**9) and _small(ast.Mult(), 10**9, 10**9)


def test_v2_environment_variables_the_manifest_would_reject_are_todos(tmp_path):
    job = 'command: python train.py\ncode: .\nenvironment_variables: {"BAD-NAME": "1", LISTED: [1, 2]}\n'
    manifest, text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.environment_variables == {}
    assert "BAD-NAME" not in uncommented(text)
    assert "environment_variables: 'BAD-NAME' is no variable name (job.yml:3)" in report
    assert "environment_variables.LISTED: not resolved statically: [1, 2] (job.yml:3)" in report
    assert "tftrain validate" not in report


@pytest.mark.parametrize(
    ("distribution", "todo"),
    [
        ("distribution: {type: mpi}\n", "node_count: not resolved statically: '${{inputs.n}}' (job.yml:4)"),
        (
            "distribution: {type: tensorflow, worker_count: 2}\n",
            "node_count: not resolved statically: '${{inputs.n}}' (job.yml:4)",
        ),
        ("", "node_count: node_count='${{inputs.n}}' without a distributed backend: choose distributed_training"),
    ],
)
def test_v2_counts_not_known_statically_are_todos(tmp_path, distribution, todo):
    job = f'command: python train.py\ncode: .\nresources: {{instance_count: "${{{{inputs.n}}}}"}}\n{distribution}'
    manifest, text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.node_count == 1
    assert "${{inputs.n}}" not in uncommented(text)
    assert todo in report
    assert "tftrain validate" not in report


def test_v2_sizes_and_timeouts_the_manifest_would_reject_are_todos(tmp_path):
    job = "command: python train.py\ncode: .\nresources: {shm_size: 2GB}\nlimits: {timeout: '${{inputs.t}}'}\n"
    manifest, _text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.shm_size is None and manifest.max_run_duration_seconds is None
    assert "shm_size: '2GB' is not a size like '2g' (job.yml:3)" in report
    assert "max_run_duration_seconds: not resolved statically: '${{inputs.t}}' (job.yml:4)" in report


def test_vm_priority_of_a_provisioned_cluster_and_dedicated_machines(tmp_path):
    text = (DATA / "tf_single.py").read_text().replace('    vm_priority="lowpriority",\n', "")
    assert "vm_priority" not in text
    cluster = (
        "compute_target = ComputeTarget.create(ws, 'cpu',"
        " AmlCompute.provisioning_configuration(vm_size='STANDARD_D2_V2', vm_priority='LowPriority'))\n"
    )
    text = text.replace("est = TensorFlow(", cluster + "est = TensorFlow(")
    manifest, _, report = imported(tmp_path, "tf_single.py", "tf-mnist/tf_mnist.py", text=text)
    assert manifest.retry is not None and manifest.retry.on == ["preempted", "lost"]
    assert manifest.compute.runner_labels == ["preemptible"]
    dedicated = text.replace("vm_priority='LowPriority'", "vm_priority='dedicated'")
    (tmp_path / "dedicated").mkdir()
    manifest, _, report = imported(tmp_path / "dedicated", "tf_single.py", "tf-mnist/tf_mnist.py", text=dedicated)
    assert manifest.retry is None and manifest.compute.runner_labels == []
    assert "vm_priority='dedicated': runs are not retried unless retry: is set" in report


def test_the_source_directorys_data_store_is_not_needed_and_says_why(tmp_path):
    text = (
        (DATA / "tf_single.py")
        .read_text()
        .replace(
            '    vm_priority="lowpriority",\n', '    vm_priority="lowpriority",\n    source_directory_data_store=ds,\n'
        )
    )
    assert "source_directory_data_store=ds" in text
    _, _, report = imported(tmp_path, "tf_single.py", "tf-mnist/tf_mnist.py", text=text)
    assert (
        "source_directory_data_store=" in report
        and "not needed — each run copies source_directory into its own run directory" in report
    )
    assert "no equivalent" not in report
