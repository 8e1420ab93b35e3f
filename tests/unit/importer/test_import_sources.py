"""Dataset.File.from_files(path=[several https URLs]) imports as one input with a list of sources
(Azure's TensorFlow how-to); what a list cannot hold is left as a TODO that says why."""

from __future__ import annotations

from conftest import REPO
from hostile import assert_clean

from runner.manifest import load_manifest
from runner.manifest.fields import InputRef

DATA = REPO / "tests" / "data" / "azureml"
BASE = "https://azureopendatasets.blob.core.windows.net/mnist/"
FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]


def import_script(cli, tmp_path, text: str):
    (tmp_path / "tf-mnist").mkdir()
    (tmp_path / "tf-mnist" / "tf_mnist.py").write_text("print('training')\n")
    (tmp_path / "job.py").write_text(text)
    result = cli("import", "azureml", str(tmp_path / "job.py"), "-o", str(tmp_path / "tftrain.yml"), cwd=tmp_path)
    assert_clean(result)
    return load_manifest(tmp_path / "tftrain.yml"), (tmp_path / "tftrain-import-report.md").read_text()


def test_the_how_to_data_set_of_four_urls_is_one_input(cli, tmp_path):
    loaded, report = import_script(cli, tmp_path, (DATA / "tf_dataset_urls.py").read_text())
    manifest = loaded.manifest
    assert manifest.inputs["mnist_dataset"].source == [BASE + name for name in FILES]
    assert manifest.inputs["mnist_dataset"].mode == "mount"
    assert manifest.script_params["--data-folder"] == InputRef(input="mnist_dataset")
    assert "TODO" not in (tmp_path / "tftrain.yml").read_text() and "## To do" not in report
    assert not loaded.warnings


def test_a_list_a_directory_cannot_hold_stays_a_todo(cli, tmp_path):
    text = (DATA / "tf_dataset_urls.py").read_text().replace("t10k-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz")
    text = text.replace("mnist/t10k-images", "other/t10k-images")
    loaded, report = import_script(cli, tmp_path, text)
    assert loaded.manifest.inputs["mnist_dataset"].source == "s3://TODO/mnist_dataset"
    assert "was 4 paths" in report and "file name 'train-labels-idx1-ubyte.gz' is also that of [1]" in report
