# Azure ML SDK v1: "train-hyperparameter-tune-deploy-with-tensorflow", the notebook's cells as a script.
import os

from azureml.core import Dataset, Environment, Experiment, ScriptRunConfig, Workspace
from azureml.core.compute import ComputeTarget
from azureml.train.hyperdrive import (
    BanditPolicy,
    HyperDriveConfig,
    PrimaryMetricGoal,
    RandomParameterSampling,
    choice,
    loguniform,
)

ws = Workspace.from_config()
exp = Experiment(workspace=ws, name="tf-mnist-hyperdrive")

web_paths = [
    "https://azureopendatasets.blob.core.windows.net/mnist/train-images-idx3-ubyte.gz",
    "https://azureopendatasets.blob.core.windows.net/mnist/train-labels-idx1-ubyte.gz",
]
dataset = Dataset.File.from_files(path=web_paths)

cluster_name = "gpu-cluster"
compute_target = ComputeTarget(workspace=ws, name=cluster_name)

script_folder = os.path.join(".", "tf-mnist")
tf_env = Environment.get(ws, name="AzureML-TensorFlow-2.3-GPU")

args = ["--data-folder", dataset.as_mount(), "--batch-size", 64, "--first-layer-neurons", 256,
        "--second-layer-neurons", 128, "--learning-rate", 0.01]
src = ScriptRunConfig(
    source_directory=script_folder,
    script="tf_mnist.py",
    arguments=args,
    compute_target=compute_target,
    environment=tf_env,
)

ps = RandomParameterSampling(
    {
        "--batch-size": choice(32, 64, 128),
        "--first-layer-neurons": choice(range(16, 528, 128)),
        "--second-layer-neurons": choice([16, 64, 256, 512]),
        "--learning-rate": loguniform(-6, -1),
    }
)
policy = BanditPolicy(evaluation_interval=2, slack_factor=0.1, delay_evaluation=4)

htc = HyperDriveConfig(
    run_config=src,
    hyperparameter_sampling=ps,
    policy=policy,
    primary_metric_name="validation_acc",
    primary_metric_goal=PrimaryMetricGoal.MAXIMIZE,
    max_total_runs=8,
    max_concurrent_runs=4,
    max_duration_minutes=120,
)

htr = exp.submit(config=htc)
htr.wait_for_completion(show_output=True)
best_run = htr.get_best_run_by_primary_metric()
model = best_run.register_model(model_name="tf-dnn-mnist", model_path="outputs/model")
