from azureml.train.dnn import TensorFlow

est = TensorFlow(source_directory="src",
    entry_script="train.py"
