"""What the static reading knows of the Azure ML SDK v1: the calls that make its objects, each
one's positional parameters, and the kind of Obj it makes."""

from __future__ import annotations

JOBS = ("TensorFlow", "Estimator", "ScriptRunConfig")
SIGNATURES: dict[str, tuple[str, ...]] = {
    "TensorFlow": ("source_directory",),
    "Estimator": ("source_directory",),
    "ScriptRunConfig": ("source_directory", "script", "arguments", "run_config"),
    "MpiConfiguration": ("process_count_per_node", "node_count"),
    "Mpi": ("process_count_per_node",),
    "TensorflowConfiguration": ("worker_count", "parameter_server_count"),
    "ParameterServer": ("worker_count", "parameter_server_count"),
    "PyTorchConfiguration": (), "Gloo": (), "Nccl": (),
    "Experiment": ("workspace", "name"),
    "Datastore": ("workspace", "name"),
    "Datastore.get": ("workspace", "datastore_name"),
    "Datastore.register_azure_blob_container": ("workspace", "datastore_name", "container_name", "account_name"),
    "DataReference": ("datastore", "data_reference_name", "path_on_datastore", "mode"),
    "DataPath": ("datastore", "path_on_datastore", "name"),
    "Dataset.File.from_files": ("path",),
    "Dataset.Tabular.from_delimited_files": ("path",),
    "Dataset.Tabular.from_parquet_files": ("path",),
    "Dataset.get_by_name": ("workspace", "name", "version"),
    "Environment": ("name",),
    "Environment.get": ("workspace", "name", "version"),
    "Environment.from_conda_specification": ("name", "file_path"),
    "Environment.from_pip_requirements": ("name", "file_path"),
    "Environment.from_docker_image": ("name", "image", "container_registry", "conda_specification", "pip_requirements"),
    "Environment.from_dockerfile": ("name", "dockerfile"),
    "Environment.from_existing_conda_environment": ("name", "conda_environment_name"),
    "CondaDependencies.create": ("pip_indexurl", "pip_packages", "conda_packages", "python_version"),
    "CondaDependencies": ("conda_dependencies_file_path",),
    "RunConfiguration": ("script", "arguments", "framework", "communicator", "conda_dependencies"),
    "ComputeTarget": ("workspace", "name"),
    "AmlCompute": ("workspace", "name"),
    "ComputeTarget.create": ("workspace", "name", "provisioning_configuration"),
    "AmlCompute.provisioning_configuration": ("vm_size",),
    "HyperDriveConfig": (),
    "Model.register": ("workspace", "model_path", "model_name"),
    "OutputFileDatasetConfig": ("name", "destination", "source"),
    "Workspace": (), "Workspace.from_config": (), "Workspace.get": ("name",), "Run.get_context": (),
}  # fmt: skip
KINDS = {  # constructor → the kind of Obj it makes (default: its own name)
    "Datastore.get": "datastore", "Datastore": "datastore", "Datastore.register_azure_blob_container": "datastore",
    "DataReference": "data_input", "DataPath": "datapath", "Dataset.File.from_files": "dataset",
    "Dataset.Tabular.from_delimited_files": "dataset", "Dataset.Tabular.from_parquet_files": "dataset",
    "Dataset.get_by_name": "dataset", "CondaDependencies.create": "conda", "CondaDependencies": "conda",
    "ComputeTarget": "compute", "AmlCompute": "compute", "ComputeTarget.create": "compute",
    "AmlCompute.provisioning_configuration": "compute_config", "Model.register": "registration",
    "Workspace.from_config": "workspace", "Workspace.get": "workspace", "Workspace": "workspace",
    "Run.get_context": "run", "OutputFileDatasetConfig": "output", "Environment.get": "Environment",
    "Environment.from_conda_specification": "Environment", "Environment.from_pip_requirements": "Environment",
    "Environment.from_docker_image": "Environment", "Environment.from_dockerfile": "Environment",
    "Environment.from_existing_conda_environment": "Environment",
}  # fmt: skip


def known_callee(dotted: str) -> str | None:
    """The SIGNATURES entry a dotted callee names: `azureml.train.dnn.TensorFlow` → `TensorFlow`."""
    parts = dotted.split(".")
    for size in (3, 2, 1):
        name = ".".join(parts[-size:])
        if len(parts) >= size and name in SIGNATURES:
            return name
    return None
