from azureml.train.dnn import TensorFlow

est = TensorFlow(
    source_directory="src",
    entry_script="train.py",
    node_count=2,
    worker_count=2,
    parameter_server_count=1,
    distributed_backend="ps",
)
