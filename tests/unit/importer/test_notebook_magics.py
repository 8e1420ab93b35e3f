"""Notebooks with IPython's magics (Azure's samples write their conda file and scoring script with
`%%writefile`, install with `%pip`): they import, and what the magics say reaches the manifest
or the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO
from hostile import assert_clean, nothing_written_outside

from runner.errors import ManifestError
from runner.importer.magics import MagicKind, split_cell
from runner.manifest import load_manifest

DATA = REPO / "tests" / "data" / "azureml"


def notebook(*sources: str) -> str:
    cells = [
        {"cell_type": "code", "source": text.splitlines(keepends=True), "metadata": {}, "outputs": []}
        for text in sources
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def run_import(cli, folder: Path, name: str):
    output = folder / "out" / "tftrain.yml"
    with nothing_written_outside(folder, output.parent):
        result = cli("import", "azureml", str(folder / name), "-o", str(output), cwd=folder)
    assert_clean(result)
    return output.read_text(), (output.parent / "tftrain-import-report.md").read_text()


def test_azure_style_notebook_with_magics_imports(cli, tmp_path):
    shutil.copy(DATA / "notebook_magics.ipynb", tmp_path)
    (tmp_path / "tf-mnist").mkdir()
    (tmp_path / "tf-mnist" / "tf_mnist.py").write_text("print('training')\n")
    _text, report = run_import(cli, tmp_path, "notebook_magics.ipynb")
    manifest = load_manifest(tmp_path / "out" / "tftrain.yml").manifest
    # the %%writefile conda file that from_conda_specification names, and both %pip lines
    assert manifest.pip_packages == ["matplotlib", "tensorflow-datasets", "pillow<11", "scikit-learn"]
    assert manifest.conda_packages == ["numpy"]
    assert manifest.use_gpu is True  # tensorflow-gpu in the written conda file
    assert (manifest.entry_script, manifest.script_params) == ("tf_mnist.py", {"--batch-size": 64})
    assert "'conda_dependencies.yml', written by the notebook at ../notebook_magics.ipynb:cell 4:1" in report
    assert "%%writefile score.py: an Azure ML scoring script" in report
    assert "%%writefile ./tf-mnist/utils.py: a file the notebook writes" in report  # $script_folder expanded
    assert "%%bash: an IPython cell magic, not imported" in report and "(../notebook_magics.ipynb:cell 6:1)" in report
    assert "!ls: an IPython shell line" in report
    assert "%%time: the cell's code is read" in report
    assert not (tmp_path / "score.py").exists() and not (tmp_path / "conda_dependencies.yml").exists()


def test_a_notebook_that_writes_its_entry_script_and_requirements(cli, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "nb.ipynb").write_text(
        notebook(
            "%%writefile src/train.py\nimport tensorflow as tf\nprint('training')\n",
            "%%writefile requirements.txt\n# pinned\npandas==2.2  # data\n--index-url https://example.invalid\n",
            "from azureml.core import Environment, ScriptRunConfig\n"
            "env = Environment.from_pip_requirements('env', file_path='requirements.txt')\n"
            "src = ScriptRunConfig(source_directory='src', script='train.py', environment=env)\n",
        )
    )
    text, report = run_import(cli, tmp_path, "nb.ipynb")
    assert "pip_packages: [pandas==2.2]" in text
    assert "%%writefile src/train.py: the notebook writes entry_script; save that cell as ../src/train.py" in report


def test_hostile_written_files_are_reported_not_followed(cli, tmp_path):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    (tmp_path / "nb.ipynb").write_text(
        notebook(
            f"%%writefile conda.yml\n{laughs}",
            "%%writefile $unknown/x.yml\na: 1\n",
            "%%writefile\n",
            "version = '1.2'\n%pip install tool==$version $unknown\n",
            "from azureml.core import Environment, ScriptRunConfig\n"
            "env = Environment.from_conda_specification('env', 'conda.yml')\n"
            "src = ScriptRunConfig(source_directory='.', script='train.py', environment=env)\n",
        )
    )
    (tmp_path / "train.py").write_text("print(1)\n")
    text, report = run_import(cli, tmp_path, "nb.ipynb")
    assert "TODO(tftrain import)" in text and "conda_dependencies_file: 'conda.yml', written by the notebook" in report
    assert "%%writefile $unknown/x.yml: the file name is not known statically" in report
    assert (
        "pip_packages: [tool==1.2]" in text
        and "%pip install tool==$version $unknown: a package name is not known" in report
    )


def test_cells_split_as_ipython_reads_them():
    code, magics = split_cell("x = (1\n     % 2)\n!echo hi\n", 10)
    assert code == ["x = (1", "     % 2)", "pass"] and [(m.kind, m.line) for m in magics] == [(MagicKind.SHELL, 12)]
    code, _ = split_cell("x = (1\n     % 2)\n", 1)
    assert code == ["x = (1", "     % 2)"]  # Python: no magic in it
    code, magics = split_cell("\n%%capture out\nimport os\nfiles = !ls\n", 1)
    assert code == ["", "", "import os", "pass"] and [m.name for m in magics] == ["capture", "ls"]
    code, magics = split_cell("%%writefile -a f.txt\nline\n", 1)
    assert code == ["", ""] and magics[0].body == "line\n" and magics[0].args == "-a f.txt"
    assert split_cell("%pip install -r req.txt -U 'a[b]>=1' --index-url X c", 1)[1][0].pip_installs() == [
        "a[b]>=1",
        "c",
    ]
    assert split_cell("!python -m pip install d", 1)[1][0].pip_installs() == ["d"]
    assert split_cell("!pip uninstall d", 1)[1][0].pip_installs() is None
    assert split_cell("%pip install 'unbalanced", 1)[1][0].pip_installs() is None


def test_a_magic_in_an_unparseable_cell_still_names_the_cell(cli, tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook("x = 1\n", "%pip install a\ny = (\n"))
    result = cli("import", "azureml", str(tmp_path / "nb.ipynb"), "-o", str(tmp_path / "o.yml"), cwd=tmp_path)
    assert result.returncode == ManifestError.exit_code and "nb.ipynb:cell 2:" in result.stderr
