import sys

from azureml.core import Experiment, Workspace
from azureml.train.estimator import Estimator


def learning_rate():
    return float(sys.argv[1])


ws = Workspace.from_config()
est = Estimator(
    source_directory=".",
    entry_script="train.py",
    script_params={"--learning-rate": learning_rate(), "--epochs": 3},
    pip_packages=["pillow", sys.argv[2]],
    framework_version=ws.tags["tf"],
)
Experiment(ws, "tuned").submit(est)
