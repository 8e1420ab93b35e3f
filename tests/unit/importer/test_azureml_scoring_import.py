"""tftrain import azureml: an SDK v1 deployment (InferenceConfig, AciWebservice.deploy_configuration,
Model.deploy) beside the training job → model.serving; what has no equivalent goes to the report."""

from __future__ import annotations

import textwrap

from test_azureml_import import imported

DEPLOY = textwrap.dedent("""
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
    """)


def scoring_files(tmp_path):
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "score.py").write_text("def init():\n    pass\n\ndef run(raw):\n    return raw\n")
    (tmp_path / "src" / "conda_dependencies.yml").write_text("dependencies:\n  - pip:\n    - numpy\n")


def test_inference_config_and_aci_settings_map_to_model_serving(tmp_path):
    scoring_files(tmp_path)
    manifest, text, report = imported(tmp_path, "deploy.py", "src/train.py", text=DEPLOY)
    serving = manifest.model.serving
    assert (serving.scoring_script, serving.conda_file, serving.cpu, serving.memory, serving.auth) == (
        "score.py",
        "conda_dependencies.yml",
        2,
        "1536Mi",
        True,
    )
    assert "Model.deploy(name='digits-service')" in report
    assert "tags=" in report and "description=" in report


def test_an_aks_config_and_an_entry_script_in_a_folder(tmp_path):
    (tmp_path / "src" / "app").mkdir(parents=True)
    (tmp_path / "src" / "app" / "score.py").write_text("def init():\n    pass\n\ndef run(raw):\n    return raw\n")
    text = DEPLOY.split("env =")[0] + textwrap.dedent("""
        from azureml.core.webservice import AksWebservice
        inference_config = InferenceConfig(entry_script="score.py", source_directory="app", runtime="python")
        aks_config = AksWebservice.deploy_configuration(autoscale_max_replicas=4, cpu_cores=0.5, memory_gb=2)
        service = Model.deploy(ws, "digits-aks", [model], inference_config, aks_config)
        """)
    manifest, _, report = imported(tmp_path, "deploy.py", "src/train.py", text=text)
    serving = manifest.model.serving
    assert (serving.scoring_script, serving.cpu, serving.memory, serving.auth) == (
        "app/score.py",
        0.5,
        "2Gi",
        True,
    )  # AKS: auth by default
    assert (
        "autoscale_max_replicas=4" in report
        and "runtime='python'" in report
        and "source_directory='app') → 'app/score.py'" in report
    )


def test_a_job_without_deployment_leaves_model_serving_alone(tmp_path):
    manifest, _, _ = imported(tmp_path, "deploy.py", "src/train.py", text=DEPLOY.split("env =")[0])
    assert manifest.model.serving.scoring_script is None


V2_DEPLOYMENT = textwrap.dedent("""
    $schema: https://azuremlschemas.azureedge.net/latest/managedOnlineDeployment.schema.json
    name: blue
    endpoint_name: digits-endpoint
    model: azureml:digits:1
    code_configuration:
      code: ../src/onlinescoring
      scoring_script: score.py
    environment:
      conda_file: ../src/onlinescoring/conda.yml
      image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest
    instance_type: Standard_DS3_v2
    instance_count: 3
    request_settings:
      request_timeout_ms: 3000
    """)


def v2_imported(tmp_path, deployment: str):
    from runner.cli.main import main
    from runner.manifest import load_manifest

    (tmp_path / "src" / "onlinescoring").mkdir(parents=True)
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    (tmp_path / "src" / "onlinescoring" / "score.py").write_text(
        "def init():\n    pass\n\ndef run(raw):\n    return raw\n"
    )
    (tmp_path / "src" / "onlinescoring" / "conda.yml").write_text("dependencies:\n  - pip:\n    - pillow\n")
    (tmp_path / "job.yml").write_text(
        "code: src\ncommand: python train.py\nenvironment: azureml:AzureML-tensorflow-2.16-cuda12@latest\n"
    )
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "deployment.yml").write_text(deployment)
    output = tmp_path / "tftrain.yml"
    code = main(
        [
            "import",
            "azureml",
            str(tmp_path / "job.yml"),
            "--deployment",
            str(tmp_path / "deploy" / "deployment.yml"),
            "-o",
            str(output),
        ]
    )
    return code, output, tmp_path / "tftrain-import-report.md", load_manifest


def test_a_v2_online_deployment_maps_to_model_serving(tmp_path):
    code, output, report, load_manifest = v2_imported(tmp_path, V2_DEPLOYMENT)
    assert code == 0
    serving = load_manifest(output).manifest.model.serving
    assert (serving.scoring_script, serving.conda_file, serving.cpu, serving.memory) == (
        "onlinescoring/score.py",
        "onlinescoring/conda.yml",
        4,
        "14Gi",
    )
    text = report.read_text()
    assert (
        "instance_count: 3" in text
        and "request_settings" in text
        and "environment.image" in text
        and "digits-endpoint" in text
    )


def test_a_v2_deployment_whose_script_is_outside_source_directory_is_a_todo(tmp_path):
    code, output, report, _ = v2_imported(
        tmp_path,
        V2_DEPLOYMENT.replace("code: ../src/onlinescoring", "code: .").replace(
            "instance_type: Standard_DS3_v2", "instance_type: Standard_Weird_v9"
        ),
    )
    assert code == 0
    text = report.read_text()
    assert "is outside source_directory: copy it there" in text and "instance_type 'Standard_Weird_v9'" in text


def test_a_file_that_is_no_deployment_is_one_line(tmp_path, capsys):
    code, *_ = v2_imported(tmp_path, "name: blue\ninstance_type: Standard_DS3_v2\n")
    assert code == 3
    error = capsys.readouterr().err.strip()
    assert (
        error.startswith("tftrain: error: --deployment")
        and "not an Azure ML online deployment" in error
        and "\n" not in error
    )
