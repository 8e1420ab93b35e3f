from azureml.core import Dataset, Environment, Experiment, ScriptRunConfig, Workspace
from azureml.core.conda_dependencies import CondaDependencies
from azureml.core.runconfig import MpiConfiguration

ws = Workspace.from_config()
web_paths = ["https://azureopendatasets.blob.core.windows.net/mnist/train-images-idx3-ubyte.gz"]
dataset = Dataset.File.from_files(path=web_paths)
dataset = dataset.register(workspace=ws, name="mnist-dataset", create_new_version=True)

env = Environment("tf-horovod")
env.docker.base_image = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.0.3-cudnn8-ubuntu18.04"
cd = CondaDependencies.create(pip_packages=["tensorflow-gpu==2.4.1", "horovod[tensorflow]", "azureml-defaults"])
cd.add_conda_package("pandas")
env.python.conda_dependencies = cd
env.environment_variables = {"TF_CPP_MIN_LOG_LEVEL": "2"}

distr_config = MpiConfiguration(process_count_per_node=2, node_count=2)
args = ["--data-dir", dataset.as_named_input("mnist").as_mount(), "--epochs", 5, "--verbose"]

src = ScriptRunConfig(
    source_directory="scripts",
    script="train_hvd.py",
    arguments=args,
    compute_target="gpu-cluster",
    environment=env,
    distributed_job_config=distr_config,
)
run = Experiment(workspace=ws, name="keras-horovod").submit(src)
