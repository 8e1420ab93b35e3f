# The data set of Azure ML's TensorFlow how-to (train-hyperparameter-tune-deploy-with-tensorflow):
# four https files in one FileDataset, mounted for the training script.
from azureml.core import Dataset, Environment, Experiment, ScriptRunConfig, Workspace

ws = Workspace.from_config()
exp = Experiment(workspace=ws, name="tf-mnist-urls")

web_paths = [
    "https://azureopendatasets.blob.core.windows.net/mnist/train-images-idx3-ubyte.gz",
    "https://azureopendatasets.blob.core.windows.net/mnist/train-labels-idx1-ubyte.gz",
    "https://azureopendatasets.blob.core.windows.net/mnist/t10k-images-idx3-ubyte.gz",
    "https://azureopendatasets.blob.core.windows.net/mnist/t10k-labels-idx1-ubyte.gz",
]
dataset = Dataset.File.from_files(path=web_paths)
dataset = dataset.register(workspace=ws, name="mnist-dataset", description="training and test dataset", create_new_version=True)

script_folder = "./tf-mnist"
args = ["--data-folder", dataset.as_mount(), "--batch-size", 64, "--first-layer-neurons", 256]
src = ScriptRunConfig(source_directory=script_folder, script="tf_mnist.py", arguments=args)
run = exp.submit(src)
