"""tftrain import azureml: ContainerRegistry → image_registry (its password never written),
user_managed / user_managed_dependencies → user_managed."""

from __future__ import annotations

from test_azureml_import import imported

PRIVATE = """
from azureml.core import Experiment, Workspace
from azureml.core.container_registry import ContainerRegistry
from azureml.train.dnn import TensorFlow

ws = Workspace.from_config()
registry = ContainerRegistry()
registry.address = "myregistry.azurecr.io"
registry.username = "trainer"
registry.password = "hunter2-literal"
est = TensorFlow(source_directory="src", entry_script="train.py", compute_target="local",
                 custom_docker_image="myregistry.azurecr.io/team/tf:2.18", image_registry_details=registry,
                 user_managed=True, pip_packages=["pillow"], framework_version="2.18")
Experiment(ws, "private").submit(est)
"""

ENVIRONMENT = """
from azureml.core import Environment, Experiment, ScriptRunConfig, Workspace

ws = Workspace.from_config()
env = Environment("mine")
env.docker.base_image = "myregistry.azurecr.io/team/tf:2.18"
env.docker.base_image_registry.address = "myregistry.azurecr.io"
env.docker.base_image_registry.username = "trainer"
env.docker.base_image_registry.password = os.environ["ACR_PASSWORD"]
env.python.user_managed_dependencies = True
config = ScriptRunConfig(source_directory="src", script="train.py", environment=env)
Experiment(ws, "env").submit(config)
"""


def test_the_estimators_registry_and_user_managed(tmp_path):
    manifest, text, report = imported(tmp_path, "private.py", "src/train.py", text=PRIVATE)
    registry = manifest.image_registry
    assert (registry.address, registry.username, registry.password_secret) == (
        "myregistry.azurecr.io",
        "trainer",
        "REGISTRY_PASSWORD",
    )
    assert manifest.secrets == ["REGISTRY_PASSWORD"]
    assert manifest.custom_docker_image == "myregistry.azurecr.io/team/tf:2.18" and manifest.use_docker
    assert manifest.user_managed and manifest.pip_packages == []
    assert "hunter2-literal" not in text and "hunter2-literal" not in report
    assert "set REGISTRY_PASSWORD in tftrain's environment" in text
    assert "no equivalent" not in report  # image_registry_details and user_managed are no longer left out
    assert "pip_packages: user_managed installs nothing" in report


def test_the_environments_registry_and_user_managed_dependencies(tmp_path):
    manifest, text, report = imported(tmp_path, "env.py", "src/train.py", text="import os\n" + ENVIRONMENT)
    assert manifest.image_registry.address == "myregistry.azurecr.io"
    assert manifest.image_registry.password_secret == "REGISTRY_PASSWORD"
    assert manifest.user_managed
    assert "user_managed_dependencies: tftrain installs" not in report
