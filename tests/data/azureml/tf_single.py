# Azure ML SDK v1: the classic "train-hyperparameter-tune-deploy-with-tensorflow" notebook, as a script.
import os

from azureml.core import Dataset, Experiment, Workspace
from azureml.core.compute import AmlCompute, ComputeTarget
from azureml.train.dnn import TensorFlow

ws = Workspace.from_config()
experiment_name = "tf-mnist"
exp = Experiment(workspace=ws, name=experiment_name)

cluster_name = "gpu-cluster"
try:
    compute_target = ComputeTarget(workspace=ws, name=cluster_name)
except Exception:
    compute_config = AmlCompute.provisioning_configuration(vm_size="STANDARD_NC6", max_nodes=4)
    compute_target = ComputeTarget.create(ws, cluster_name, compute_config)

ds = ws.get_default_datastore()
ds.upload(src_dir="./data/mnist", target_path="mnist", overwrite=True)

script_folder = os.path.join(".", "tf-mnist")
epochs = 10
script_params = {
    "--data-folder": ds.path("mnist").as_mount(),
    "--batch-size": 64,
    "--first-layer-neurons": 256,
    "--learning-rate": 0.01,
    "--epochs": epochs,
}

est = TensorFlow(
    source_directory=script_folder,
    entry_script="tf_mnist.py",
    script_params=script_params,
    compute_target=compute_target,
    pip_packages=["pillow", "azureml-defaults"],
    conda_packages=["scikit-learn"],
    framework_version="2.0",
    use_gpu=True,
    max_run_duration_seconds=60 * 60,
    vm_priority="lowpriority",
)

run = exp.submit(est)
run.wait_for_completion(show_output=True)
model = run.register_model(model_name="tf-dnn-mnist", model_path="outputs/model")
