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
    # HyperDrive (azureml.train.hyperdrive): the sweep, its sampling, policies and expressions
    "HyperDriveConfig": (
        "hyperparameter_sampling", "primary_metric_name", "primary_metric_goal", "max_total_runs",
        "max_concurrent_runs", "max_duration_minutes", "policy", "estimator", "run_config", "resume_from",
        "resume_child_runs",
    ),
    "HyperDriveRunConfig": (
        "estimator", "hyperparameter_sampling", "primary_metric_name", "primary_metric_goal", "max_total_runs",
        "max_concurrent_runs", "max_duration_minutes", "policy",
    ),
    "RandomParameterSampling": ("parameter_space", "properties"),
    "GridParameterSampling": ("parameter_space", "properties"),
    "BayesianParameterSampling": ("parameter_space", "properties"),
    "BanditPolicy": ("evaluation_interval", "slack_factor", "slack_amount", "delay_evaluation"),
    "MedianStoppingPolicy": ("evaluation_interval", "delay_evaluation"),
    "TruncationSelectionPolicy": ("truncation_percentage", "evaluation_interval", "delay_evaluation"),
    "NoTerminationPolicy": (),
    "choice": (),  # choice(1, 2, 3) or choice([1, 2, 3]): its arguments are all under "*"
    "randint": ("upper",),
    "uniform": ("min_value", "max_value"), "quniform": ("min_value", "max_value", "q"),
    "loguniform": ("min_value", "max_value"), "qloguniform": ("min_value", "max_value", "q"),
    "normal": ("mu", "sigma"), "qnormal": ("mu", "sigma", "q"),
    "lognormal": ("mu", "sigma"), "qlognormal": ("mu", "sigma", "q"),
    "Model.register": ("workspace", "model_path", "model_name"),
    "OutputFileDatasetConfig": ("name", "destination", "source"),
    "ContainerRegistry": (),
    "Workspace": (), "Workspace.from_config": (), "Workspace.get": ("name",), "Run.get_context": (),
    # deployment (azureml.core.model, azureml.core.webservice): mapped to model.serving (importer/azureml_scoring.py)
    "InferenceConfig": ("entry_script", "runtime", "conda_file", "extra_docker_file_steps", "source_directory",
                        "enable_gpu",
                        "description", "base_image", "base_image_registry", "cuda_version", "environment"),
    "AciWebservice.deploy_configuration": ("cpu_cores", "memory_gb", "tags", "properties", "description", "location",
                                           "auth_enabled"),
    "AksWebservice.deploy_configuration": ("autoscale_enabled", "autoscale_min_replicas", "autoscale_max_replicas",
                                           "autoscale_refresh_seconds", "autoscale_target_utilization",
                                           "collect_model_data",
                                           "auth_enabled", "cpu_cores", "memory_gb"),
    "LocalWebservice.deploy_configuration": ("port",),
    "Model.deploy": ("workspace", "name", "models", "inference_config", "deployment_config", "deployment_target",
                     "overwrite"),
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
    "HyperDriveRunConfig": "HyperDriveConfig",
    "AciWebservice.deploy_configuration": "deployment_config",
    "AksWebservice.deploy_configuration": "deployment_config",
    "LocalWebservice.deploy_configuration": "deployment_config",
}  # fmt: skip


def known_callee(dotted: str) -> str | None:
    """The SIGNATURES entry a dotted callee names: `azureml.train.dnn.TensorFlow` → `TensorFlow`."""
    parts = dotted.split(".")
    for size in (3, 2, 1):
        name = ".".join(parts[-size:])
        if len(parts) >= size and name in SIGNATURES:
            break
    else:
        return None
    # HyperDrive's expressions are plain functions: `random.choice` or `np.random.uniform` are not them.
    if name.islower() and len(parts) > 1 and not {"hyperdrive", "parameter_expressions"} & set(parts):
        return None
    return name
