"""tftrain import azureml: an SDK v1 deployment (InferenceConfig, AciWebservice.deploy_configuration,
Model.deploy) beside the training job → model.serving; what has no equivalent goes to the report."""

from __future__ import annotations

import textwrap

from test_azureml_import import imported

DEPLOY = textwrap.dedent(
    """
    from azureml.core import Environment, Experiment, ScriptRunConfig, Workspace
    from azureml.core.model import InferenceConfig, Model
    from azureml.core.webservice import AciWebservice

    ws = Workspace.from_config()
    config = ScriptRunConfig(source_directory="src", script="train.py", arguments=["--epochs", 5])
    run = Experiment(ws, "digits").submit(config)
    model = run.register_model(model_name="digits", model_path="outputs/model")
    env = Environment.from_conda_specification(name="scoring-env", file_path="conda_dependencies.yml")
    inference_config = InferenceConfig(entry_script="score.py", environment=env)
    aci_config = AciWebservice.deploy_configuration(cpu_cores=2, memory_gb=1.5, auth_enabled=True,
                                                    tags={"team": "vision"}, description="digits")
    service = Model.deploy(ws, "digits-service", [model], inference_config, aci_config)
    """
)


def scoring_files(tmp_path):
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "score.py").write_text("def init():\n    pass\n\ndef run(raw):\n    return raw\n")
    (tmp_path / "src" / "conda_dependencies.yml").write_text("dependencies:\n  - pip:\n    - numpy\n")


def test_inference_config_and_aci_settings_map_to_model_serving(tmp_path):
    scoring_files(tmp_path)
    manifest, text, report = imported(tmp_path, "deploy.py", "src/train.py", text=DEPLOY)
    serving = manifest.model.serving
    assert (serving.scoring_script, serving.conda_file, serving.cpu, serving.memory, serving.auth) == (
        "score.py", "conda_dependencies.yml", 2, "1536Mi", True)
    assert "Model.deploy(name='digits-service')" in report
    assert "tags=" in report and "description=" in report


def test_an_aks_config_and_an_entry_script_in_a_folder(tmp_path):
    (tmp_path / "src" / "app").mkdir(parents=True)
    (tmp_path / "src" / "app" / "score.py").write_text("def init():\n    pass\n\ndef run(raw):\n    return raw\n")
    text = DEPLOY.split("env =")[0] + textwrap.dedent(
        """
        from azureml.core.webservice import AksWebservice
        inference_config = InferenceConfig(entry_script="score.py", source_directory="app", runtime="python")
        aks_config = AksWebservice.deploy_configuration(autoscale_max_replicas=4, cpu_cores=0.5, memory_gb=2)
        service = Model.deploy(ws, "digits-aks", [model], inference_config, aks_config)
        """
    )
    manifest, _, report = imported(tmp_path, "deploy.py", "src/train.py", text=text)
    serving = manifest.model.serving
    assert (serving.scoring_script, serving.cpu, serving.memory, serving.auth) == ("app/score.py", 0.5, "2Gi", True)  # AKS: auth by default
    assert "autoscale_max_replicas=4" in report and "runtime='python'" in report and "source_directory='app') → 'app/score.py'" in report


def test_a_job_without_deployment_leaves_model_serving_alone(tmp_path):
    manifest, _, _ = imported(tmp_path, "deploy.py", "src/train.py", text=DEPLOY.split("env =")[0])
    assert manifest.model.serving.scoring_script is None
