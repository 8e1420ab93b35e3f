"""A scoring script as the gate checks it (runner.serving.scoring.check, in-process here): a script
without init/run, one whose import or init() raises, run() answering what JSON cannot hold or
raising on the sample — each one line with the script's FILE:LINE; and the conda file's packages."""

from __future__ import annotations

import json
import textwrap

import pytest

import runner
from runner.errors import ManifestError
from runner.serving.scoring import script as scoring_script
from runner.serving.scoring.check import check_script
from runner.serving.scoring.gate import DROPPED, conda_packages


@pytest.fixture
def model(tmp_path, monkeypatch):
    for name in ("AZUREML_MODEL_DIR", "TFTRAIN_MODEL_NAME", "TFTRAIN_MODEL_PATH", "TFTRAIN_MODEL_VERSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    directory = tmp_path / "outputs" / "model"
    directory.mkdir(parents=True)
    (directory / "weights.txt").write_text("3")
    return directory


def check(tmp_path, model, source: str, sample: str | None = '{"data": [1, 2]}') -> dict:
    script = tmp_path / "score.py"
    script.write_text(textwrap.dedent(source))
    request = None
    if sample is not None:
        request = tmp_path / "sample.json"
        request.write_text(sample)
    return check_script(script, model, tmp_path, "digits", request)


GOOD = """
    import json, os
    from azureml.core.model import Model

    def init():
        global factor
        factor = int(open(os.path.join(Model.get_model_path("digits"), "weights.txt")).read())

    def run(raw_data):
        return [value * factor for value in json.loads(raw_data)["data"]]
"""


def test_a_good_script_is_initialised_and_answers_the_sample(tmp_path, model):
    result = check(tmp_path, model, GOOD)
    assert result["ok"] and "answered" in result["run"]
    assert json.loads((tmp_path / "score-answer.json").read_text()) == [3, 6]


@pytest.mark.parametrize(
    "source, error",
    [
        ("def run(data):\n    return data\n", "scoring script score.py defines no init() function"),
        ("def init():\n    pass\n", "scoring script score.py defines no run() function"),
        (
            "import json\n\ndef init():\n    raise OSError('model.json is missing')\n\ndef run(d):\n    return d\n",
            "scoring script score.py: init() raised OSError: model.json is missing (score.py:4)",
        ),
        (
            "def init():\n    pass\n\ndef run(d):\n    return {1, 2}\n",
            "scoring script score.py: run() returned set, which JSON cannot hold",
        ),
        (
            "def init():\n    pass\n\ndef run(d):\n    return float('nan')\n",
            "scoring script score.py: run() returned float, which JSON cannot hold",
        ),
        (
            "def init():\n    pass\n\ndef run(d):\n    x = 1\n    return d['data']\n",
            (
                "scoring script score.py: run() on model.serving.sample_request raised TypeError: string indices must"
                " be integers"
            ),
        ),
        (
            "import no_such_package\n",
            (
                "scoring script importing score.py failed: ModuleNotFoundError: No module named 'no_such_package'"
                " (score.py:1)"
            ),
        ),
        ("def init(:\n", "scoring script importing score.py failed: SyntaxError"),
        ("import sys\nsys.exit(4)\n", "scoring script importing score.py failed: SystemExit: 4 (score.py:2)"),
        (
            (
                "from azureml.core.model import Model\n\ndef init():\n    Model.get_model_path('other')\n\ndef"
                " run(d):\n    return d\n"
            ),
            (
                "scoring script score.py: init() raised runner.compat.model_path.ModelNotFoundError:"
                " Model.get_model_path('other'): the model served here is 'digits' (score.py:4)"
            ),
        ),
    ],
)
def test_a_failing_script_is_one_line_with_its_line(tmp_path, model, source, error):
    result = check(tmp_path, model, source)
    assert not result["ok"] and result["error"].startswith(error), result["error"]
    assert "\n" not in result["error"] and "Traceback" not in result["error"]


def test_without_a_sample_request_init_alone_is_checked(tmp_path, model):
    result = check(tmp_path, model, GOOD, sample=None)
    assert result["ok"] and result["run"].startswith("no model.serving.sample_request")


def test_a_registered_file_is_what_get_model_path_returns(tmp_path, monkeypatch):
    single = tmp_path / "model.h5"
    single.write_text("x")
    variables = scoring_script.model_variables(single, "digits", 4)
    assert variables == {
        "AZUREML_MODEL_DIR": str(tmp_path),
        "TFTRAIN_MODEL_NAME": "digits",
        "TFTRAIN_MODEL_PATH": str(single),
        "TFTRAIN_MODEL_VERSION": "4",
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    from runner.compat.model_path import Model, ModelNotFoundError

    assert Model.get_model_path("digits") == str(single) == Model.get_model_path("digits", version=4)
    with pytest.raises(ModelNotFoundError, match="the version served is 4"):
        Model.get_model_path("digits", version=3)
    with pytest.raises(NotImplementedError):
        Model(None, "digits")
    monkeypatch.delenv("AZUREML_MODEL_DIR")
    with pytest.raises(ModelNotFoundError, match="no model is being served here"):
        Model.get_model_path("digits")


def test_the_layer_exports_model_where_azure_scripts_import_it():
    import importlib
    import sys

    shims = str(scoring_script.shims(__import__("pathlib").Path(runner.__file__).resolve().parents[1]))
    sys.path.insert(0, shims)
    try:
        for name in [key for key in sys.modules if key == "azureml" or key.startswith("azureml.")]:
            del sys.modules[name]
        core = importlib.import_module("azureml.core")
        from runner.compat.model_path import Model

        assert core.Model is Model and importlib.import_module("azureml.core.model").Model is Model
    finally:
        sys.path.remove(shims)
        for name in [key for key in sys.modules if key == "azureml" or key.startswith("azureml.")]:
            del sys.modules[name]


def test_recorded_reads_only_a_scoring_entry_that_names_a_script(tmp_path):
    (tmp_path / "serving").mkdir()
    assert scoring_script.recorded(tmp_path) is None
    for text in ("[]", "{", '{"scoring": "score.py"}', '{"scoring": {"script": 3}}', "[" * 100_000 + "]" * 100_000):
        (tmp_path / "serving" / "serving.json").write_text(text)
        assert scoring_script.recorded(tmp_path) is None
    (tmp_path / "serving" / "serving.json").write_text('{"scoring": {"script": "score.py", "auth": true}}')
    assert scoring_script.recorded(tmp_path) == {"script": "score.py", "auth": True}


AZURE_CONDA = """
name: project_environment
dependencies:
  - python=3.8.10
  - pip=20.2.4
  - conda-forge::pillow=8.0
  - pip:
    - azureml-defaults
    - tensorflow==2.4.0
    - keras
    - inference-schema[numpy-support]
    - joblib==1.0.1
channels:
  - conda-forge
"""


def test_a_conda_file_gives_its_pip_list_and_plain_conda_names():
    packages = conda_packages(AZURE_CONDA, "env.yml")
    assert packages == [
        "pillow",
        "azureml-defaults",
        "tensorflow==2.4.0",
        "keras",
        "inference-schema[numpy-support]",
        "joblib==1.0.1",
    ]
    kept = [package for package in packages if not DROPPED.match(package.split("=")[0].split("[")[0])]
    assert kept == ["pillow", "joblib==1.0.1"]


@pytest.mark.parametrize(
    "text, error",
    [
        ("[", "not YAML"),
        ("name: x\n", "no `dependencies:` list"),
        ("dependencies:\n  - pip:\n    - --extra-index-url=http://evil\n", "is not a package"),
    ],
)
def test_a_bad_conda_file_is_one_line(text, error):
    with pytest.raises(ManifestError, match=error) as info:
        conda_packages(text, "env.yml")
    assert "\n" not in str(info.value)


def test_what_counts_as_the_request_s_fault():
    class InvalidArgumentError(Exception):  # TensorFlow's, by name: the stdlib module never imports TensorFlow
        pass

    assert all(
        scoring_script.rejected(exc)
        for exc in (ValueError("x"), KeyError("data"), IndexError(), TypeError(), InvalidArgumentError())
    )
    assert not any(
        scoring_script.rejected(exc) for exc in (RuntimeError(), OSError(), MemoryError(), ZeroDivisionError())
    )


@pytest.mark.parametrize("packages", [["--index-url=http://evil"], ["numpy\n-r /etc/passwd"], "numpy", [3], [" "]])
def test_recorded_packages_that_pip_would_read_as_options_are_refused(packages):
    with pytest.raises(ValueError, match="scoring.packages"):
        scoring_script.packages_of({"script": "score.py", "packages": packages})
    assert scoring_script.packages_of({"script": "score.py", "packages": ["numpy", "pillow==10.*"]}) == (
        "numpy",
        "pillow==10.*",
    )


def test_a_version_s_scoring_entry_without_a_script_is_no_scoring_version(tmp_path):
    from runner.serving.image import VersionFiles

    for serving in (None, {}, {"scoring": {}}, {"scoring": {"script": None}}, {"scoring": []}):
        assert VersionFiles(None, None, serving).scoring is None
    assert VersionFiles(None, None, {"scoring": {"script": "score.py"}}).scoring == {"script": "score.py"}
