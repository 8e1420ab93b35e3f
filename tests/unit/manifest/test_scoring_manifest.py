"""model.serving's scoring-script keys: each bad value one line naming the field; a script or
sample outside source_directory or reached through a symlink is refused at validation."""

from __future__ import annotations

import os

import pytest
from manifest_errors import error_of, one_line_error

from runner.manifest import load_manifest

SCRIPT = "model:\n  serving:\n    scoring_script: score.py\n"


def with_files(project, manifest: str, **files: str):
    path = project(manifest=manifest)
    for name, text in files.items():
        (path.parent / "src" / name.replace("__", "/")).parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "src" / name.replace("__", "/")).write_text(text)
    return path


@pytest.mark.parametrize(
    "manifest, error",
    [
        (
            "model:\n  serving: {auth: true}\n",
            "5: model.serving.auth: model.serving.auth protects a scoring script's /score",
        ),
        (
            "model:\n  serving: {pip_packages: [numpy]}\n",
            "5: model.serving.pip_packages: model.serving.pip_packages belongs to a scoring script",
        ),
        (
            "model:\n  serving: {scoring_script: score.txt}\n",
            "5: model.serving.scoring_script: 'score.txt' must be a .py file",
        ),
        (
            "model:\n  serving: {scoring_script: missing.py}\n",
            "5: model.serving.scoring_script: 'missing.py' not found in source_directory",
        ),
        (
            "model:\n  serving: {scoring_script: ../score.py}\n",
            "5: model.serving.scoring_script: '../score.py' must be a relative path inside source_directory",
        ),
        (
            "model:\n  serving: {scoring_script: /etc/passwd.py}\n",
            "5: model.serving.scoring_script: '/etc/passwd.py' must be a relative path",
        ),
        (
            "model:\n  gate: off\n  serving: {scoring_script: train.py}\n",
            "6: model.serving.scoring_script: the gate runs the scoring script's init() and run()",
        ),
        (
            "model:\n  serving: {scoring_script: train.py, pip_packages: ['--index-url=http://evil']}\n",
            "5: model.serving.pip_packages[0]: '--index-url=http://evil' is not a package",
        ),
        (
            "model:\n  serving: {scoring_script: train.py, sample_request: sample.npy}\n",
            "5: model.serving.sample_request: 'sample.npy' must be a .json file",
        ),
        (
            "model:\n  serving: {scoring_script: train.py, auth: maybe}\n",
            "5: model.serving.auth: Input should be a valid boolean",
        ),
    ],
)
def test_bad_scoring_settings_are_one_line(project, manifest, error):
    one_line_error(project, manifest, error)


def test_a_scoring_script_behind_a_symlink_is_refused_even_inside_source_directory(project, tmp_path):
    path = project(manifest=SCRIPT)
    (path.parent / "src" / "real.py").write_text("def init(): pass\ndef run(d): return d\n")
    os.symlink("real.py", path.parent / "src" / "score.py")
    with pytest.raises(Exception) as info:
        load_manifest(path)
    assert "model.serving.scoring_script: 'score.py' goes through the symlink 'score.py'" in str(info.value)


def test_a_directory_link_out_of_source_directory_is_refused(project, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "score.py").write_text("def init(): pass\n")
    path = project(manifest="model:\n  serving:\n    scoring_script: app/score.py\n")
    os.symlink(outside, path.parent / "src" / "app")
    message = error_of(project, "model:\n  serving:\n    scoring_script: app/score.py\n")
    assert "goes through the symlink 'app'" in message and "\n" not in message


def test_a_sample_request_behind_a_link_is_refused(project, tmp_path):
    path = with_files(project, SCRIPT + "    sample_request: sample.json\n", **{"score.py": "def init(): pass\n"})
    (tmp_path / "secret.json").write_text("{}")
    os.symlink(tmp_path / "secret.json", path.parent / "src" / "sample.json")
    message = error_of(lambda manifest: path, "")
    assert "model.serving.sample_request: 'sample.json' goes through the symlink" in message


def test_conda_file_and_pip_packages_are_one_or_the_other(project):
    path = with_files(
        project,
        "model:\n  serving: {scoring_script: train.py, pip_packages: [numpy], conda_file: env.yml}\n",
        **{"env.yml": "dependencies: [pip]\n"},
    )
    message = error_of(lambda manifest: path, "")
    assert "model.serving.pip_packages: give conda_file or pip_packages, not both" in message and "\n" not in message


def test_the_keys_as_azure_names_them_load(project):
    path = with_files(
        project,
        SCRIPT
        + "    conda_file: env.yml\n    sample_request: sample.json\n    auth: true\n    cpu: 2\n    memory: 4Gi\n",
        **{
            "score.py": "def init(): pass\ndef run(d): return d\n",
            "env.yml": "dependencies: [pip]\n",
            "sample.json": "{}",
        },
    )
    serving = load_manifest(path).manifest.model.serving
    assert (
        serving.scoring_script,
        serving.conda_file,
        serving.sample_request,
        serving.auth,
        serving.cpu,
        serving.memory,
    ) == ("score.py", "env.yml", "sample.json", True, 2.0, "4Gi")
