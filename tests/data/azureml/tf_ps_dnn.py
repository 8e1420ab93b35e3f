import azureml.train.dnn as dnn
from azureml.core import Experiment, Workspace

ws = Workspace.from_config()
est = dnn.TensorFlow(
    source_directory="./tf-distr-ps",
    entry_script="tf_mnist_replica.py",
    node_count=2,
    distributed_training=dnn.ParameterServer(worker_count=2, parameter_server_count=1),
)
Experiment(ws, "ps-dnn").submit(est)
