from azureml.core import Experiment, Workspace
from azureml.core.runconfig import MpiConfiguration
from azureml.train.dnn import TensorFlow

ws = Workspace.from_config()
project_folder = "./tf-distr-hvd"

estimator = TensorFlow(
    project_folder,
    compute_target="gpu-cluster",
    entry_script="tf_horovod_word2vec.py",
    script_params={"--input_data": "text8.zip", "--steps": 2000},
    node_count=2,
    process_count_per_node=1,
    distributed_training=MpiConfiguration(),
    framework_version="1.13",
    use_gpu=True,
    environment_variables={"NCCL_DEBUG": "INFO"},
)

run = Experiment(ws, "tf-distr-hvd").submit(estimator)
