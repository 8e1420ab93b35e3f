from azureml.train.dnn import TensorFlow

est = TensorFlow(
    source_directory="src",
    entry_script="train.py",
    node_count=2,
    process_count_per_node=2,
    distributed_backend="mpi",
    framework_version="1.12",
)
