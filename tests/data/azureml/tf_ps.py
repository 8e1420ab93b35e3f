from azureml.core import Experiment, Workspace
from azureml.core.runconfig import TensorflowConfiguration
from azureml.train.dnn import TensorFlow

ws = Workspace.from_config()
distributed_training = TensorflowConfiguration()
distributed_training.worker_count = 2

tf_est = TensorFlow(
    source_directory="./tf-distr-ps",
    compute_target="cpu-cluster",
    entry_script="tf_mnist_replica.py",
    script_params={"--num_gpus": 1, "--train_steps": 500},
    node_count=2,
    distributed_training=distributed_training,
    framework_version="2.17",
)
Experiment(ws, "tf-distr-ps").submit(tf_est)
