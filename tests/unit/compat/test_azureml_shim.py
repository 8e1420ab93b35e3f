"""The azureml compatibility layer in-process: what each Run call writes, and when it is on."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from builders import loaded

from runner.compat import azureml_reason, declares_sdk, imports_azureml
from runner.compat.run_context import Run, stub


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("TFTRAIN_METRICS_FILE", str(tmp_path / "metrics.jsonl"))
    monkeypatch.setenv("TFTRAIN_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("TFTRAIN_RUN_ID", "demo-7")
    monkeypatch.setenv("TFTRAIN_EXPERIMENT", "demo")
    monkeypatch.setenv("TFTRAIN_INPUTS", json.dumps({"mnist": "/data/mnist"}))
    monkeypatch.setattr(Run, "_context", None)
    return Run.get_context()


def records(tmp_path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k != "time"}
        for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
    ]


def test_identity_and_inputs(run):
    assert run is Run.get_context()
    assert (run.id, run.experiment.name, run.parent, run.input_datasets) == (
        "demo-7",
        "demo",
        None,
        {"mnist": "/data/mnist"},
    )


def test_logging_writes_points_and_tags(run, tmp_path):
    run.log("loss", 0.5)
    run.log("loss", 0.25)
    run.log("optimizer", "adam")
    run.log_list("lr", [0.1, 0.01])
    run.log_row("final", acc=0.9)
    run.log_table("per_class", {"recall": [0.8, 0.7]})
    assert records(tmp_path) == [
        {"name": "loss", "value": 0.5, "step": 0},
        {"name": "loss", "value": 0.25, "step": 1},
        {"tag": "optimizer", "value": "adam"},
        {"name": "lr", "value": 0.1, "step": 0},
        {"name": "lr", "value": 0.01, "step": 1},
        {"name": "final.acc", "value": 0.9, "step": 0},
        {"name": "per_class.recall", "value": 0.8, "step": 0},
        {"name": "per_class.recall", "value": 0.7, "step": 1},
    ]
    assert run.get_metrics() == {
        "loss": [0.5, 0.25],
        "lr": [0.1, 0.01],
        "final.acc": 0.9,
        "per_class.recall": [0.8, 0.7],
    }
    assert run.get_metrics("loss") == {"loss": [0.5, 0.25]} and run.get_metrics("nothing") == {}


def test_files_go_to_outputs(run, tmp_path):
    source = tmp_path / "model.pkl"
    source.write_bytes(b"weights")
    run.upload_file("outputs/model.pkl", str(source))
    run.upload_file("notes/readme.txt", io.BytesIO(b"hi"))
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    run.upload_folder("outputs/tree", str(folder))
    assert run.get_file_names() == ["outputs/model.pkl", "outputs/notes/readme.txt", "outputs/tree/sub/a.txt"]
    run.download_file("outputs/model.pkl", str(tmp_path / "copy.pkl"))
    assert (tmp_path / "copy.pkl").read_bytes() == b"weights"
    with pytest.raises(FileNotFoundError, match="missing.bin: not in this run's outputs"):
        run.download_file("outputs/missing.bin", str(tmp_path))
    with pytest.raises(ValueError, match="relative paths inside the run"):
        run.upload_file("../escape.txt", str(source))


def test_images_tags_and_status(run, tmp_path):
    image = tmp_path / "plot.png"
    image.write_bytes(b"\x89PNG")
    run.log_image("confusion", path=str(image))
    plot = SimpleNamespace(savefig=lambda path: open(path, "wb").write(b"\x89PNG"))
    run.log_image("curve", plot=plot)
    run.tag("stage")
    run.set_tags({"team": "vision"})
    run.set_tags(["nightly"])
    assert run.get_tags() == {"stage": "", "team": "vision", "nightly": ""}
    run.fail(error_details="bad data")
    assert run.get_status() == "Failed"
    assert records(tmp_path)[:2] == [
        {"image": "outputs/images/confusion.png", "name": "confusion"},
        {"image": "outputs/images/curve.png", "name": "curve"},
    ]
    assert records(tmp_path)[-1] == {"status": "failed", "error": "bad data"}


def test_what_is_not_supported_says_so(run):
    with pytest.raises(
        NotImplementedError, match=r"Run.register_model is not supported .*declare `model: \{path: outputs/…\}`"
    ):
        run.register_model(model_name="m", model_path="outputs/model")
    with pytest.raises(
        NotImplementedError, match="Run.get_details is not supported .*see docs/azureml.md: Coming from Azure ML"
    ):
        run.get_details()
    workspace = stub("azureml.core", "Workspace")
    with pytest.raises(NotImplementedError, match=r"Workspace.from_config is not supported"):
        workspace.from_config()
    with pytest.raises(NotImplementedError, match=r"Workspace\(\) is not supported"):
        workspace()


def test_when_the_layer_is_on(tmp_path):
    azure = "from azureml.core import Run\n"
    assert (
        azureml_reason(loaded(tmp_path, azure), None)
        == "train.py imports azureml and the Azure ML SDK is not installed"
    )
    assert azureml_reason(loaded(tmp_path, "import azureml.core as a\n"), None) is not None
    assert azureml_reason(loaded(tmp_path, "print('no azure')\n"), None) is None
    assert azureml_reason(loaded(tmp_path, "print('no azure')\n", compat="azureml"), None) == "compat: azureml"
    assert azureml_reason(loaded(tmp_path, azure, compat="none"), None) is None
    assert azureml_reason(loaded(tmp_path, azure, pip_packages=["azureml-core==1.57"]), None) is None
    (tmp_path / "requirements.txt").write_text("numpy\nazureml_defaults>=1.0 ; python_version>'3'\n")
    assert declares_sdk(loaded(tmp_path, azure, pip_requirements_file="requirements.txt"))
    assert not imports_azureml(tmp_path / "missing.py")
