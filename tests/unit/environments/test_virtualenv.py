from __future__ import annotations

import sys

import pytest

from runner.environments.virtualenv import env_spec, framework_requirement, installed_framework_version
from runner.errors import UnsupportedError
from runner.manifest import load_manifest


def spec_for(project, manifest: str):
    loaded = load_manifest(project(manifest=manifest))
    return env_spec(loaded.manifest, loaded.source_dir)


def test_no_packages_means_the_current_interpreter(project):
    spec = spec_for(project, "")
    assert spec.key is None
    assert sys.executable in spec.describe()


def test_installed_framework_version_is_reused(project):
    installed = installed_framework_version()
    assert installed, "the test environment has TensorFlow"
    major_minor = ".".join(installed.split(".")[:2])
    assert spec_for(project, f"framework_version: '{major_minor}'\n").key is None


def test_other_framework_version_needs_a_virtualenv(project):
    spec = spec_for(project, "framework_version: '2.21'\n")
    assert spec.key is not None
    assert spec.requirements == ("tensorflow-cpu==2.21.*", "tensorboard")
    assert "tensorflow-cpu==2.21." in spec.constraints and "tested set" in spec.describe()


def test_key_follows_everything_that_goes_into_the_environment(project, tmp_path):
    base = spec_for(project, "framework_version: '2.18'\npip_packages: [scikit-learn]\n")
    assert base.requirements == ("tensorflow-cpu==2.18.*", "tensorboard", "scikit-learn")
    assert spec_for(project, "framework_version: '2.18'\npip_packages: [scikit-learn]\n").key == base.key
    assert spec_for(project, "framework_version: '2.18'\npip_packages: [scikit-learn, six]\n").key != base.key
    assert spec_for(project, "framework_version: '2.17'\npip_packages: [scikit-learn]\n").key != base.key
    (tmp_path / "project" / "src" / "requirements.txt").write_text("six\n")
    with_file = spec_for(
        project, "framework_version: '2.18'\npip_packages: [scikit-learn]\npip_requirements_file: requirements.txt\n"
    )
    (tmp_path / "project" / "src" / "requirements.txt").write_text("six==1.16.0\n")
    changed = spec_for(
        project, "framework_version: '2.18'\npip_packages: [scikit-learn]\npip_requirements_file: requirements.txt\n"
    )
    assert len({base.key, with_file.key, changed.key}) == 3


def test_gpu_and_user_pinned_framework(project):
    loaded = load_manifest(project(manifest="framework_version: '2.18.1'\n"))
    assert framework_requirement(loaded.manifest) == "tensorflow-cpu==2.18.1"
    loaded = load_manifest(project(manifest="pip_packages: ['tensorflow==2.16.1']\n"))
    assert framework_requirement(loaded.manifest) is None


def test_conda_on_the_local_target_is_a_clear_error(project):
    with pytest.raises(UnsupportedError, match="conda_packages: the local target has no conda"):
        spec_for(project, "conda_packages: [numpy]\n")


def test_horovod_steps_add_tf_keras_only_with_keras_3():
    from runner.environments.virtualenv import horovod_steps

    assert [step.args[-1] for step in horovod_steps("2.18")] == ["tf-keras==2.18.*", "horovod==0.28.1"]
    assert [step.args[-1] for step in horovod_steps("2.17.1")] == ["tf-keras==2.17.*", "horovod==0.28.1"]
    assert [step.args[-1] for step in horovod_steps("2.15")] == ["horovod==0.28.1"]


def test_the_framework_version_comes_from_the_package_list():
    from runner.environments.virtualenv import PythonEnv, framework_version_of, packages_in

    assert framework_version_of({"numpy": "1.26.4", "tensorflow_cpu": "2.17.1"}) == "2.17.1"
    assert framework_version_of({"Tensorflow": "2.18.0", "tensorflow-cpu": "2.17.1"}) == "2.18.0"
    assert framework_version_of({"numpy": "1.26.4"}) is None
    assert framework_version_of(packages_in(PythonEnv(sys.executable, None, True))) == installed_framework_version()


def test_the_tested_set_goes_into_the_environment_and_its_key(project, tmp_path, monkeypatch):
    from runner.frameworks import curated

    spec = spec_for(project, "framework_version: '2.21'\npip_packages: [six, 'numpy<3']\n")
    assert spec.constraints == curated.constraint_set("2.21").constraints(frozenset({"six", "numpy"}))
    assert "numpy==" not in spec.constraints  # the user's numpy wins
    # no framework_version: the default release's set holds the unpinned requirement
    default = spec_for(project, "pip_packages: [six]\n")
    assert default.requirements[:2] == ("tensorflow-cpu", "tensorboard")
    assert (
        default.constraints == curated.constraints_for(None, ["six"]) and "tensorflow-cpu==2.18." in default.constraints
    )
    # a refreshed set builds a new environment
    refreshed = tmp_path / "sets"
    refreshed.mkdir()
    (refreshed / "tensorflow-2.21.txt").write_text(curated.set_path("2.21").read_text().replace("numpy==", "numpy==0"))
    monkeypatch.setattr(curated, "CONSTRAINTS_DIR", refreshed)
    again = spec_for(project, "framework_version: '2.21'\npip_packages: [six]\n")
    assert "numpy==0" in again.constraints
    monkeypatch.undo()
    assert again.key != spec_for(project, "framework_version: '2.21'\npip_packages: [six]\n").key


def test_a_user_pinned_tensorflow_or_another_patch_gets_no_set(project):
    assert spec_for(project, "pip_packages: ['tensorflow-cpu==2.17.1']\n").constraints is None
    other_patch = spec_for(project, "framework_version: '2.21.9'\n")
    assert other_patch.requirements == ("tensorflow-cpu==2.21.9", "tensorboard") and other_patch.constraints is None


def test_a_gpu_environment_is_held_by_the_same_set(project):
    spec = spec_for(project, "framework_version: '2.21'\nuse_gpu: true\n")
    assert spec.requirements == ("tensorflow[and-cuda]==2.21.*", "tensorboard")
    assert "tensorflow==2.21.0\n" in spec.constraints


def test_use_gpu_never_trains_on_an_interpreter_whose_tensorflow_is_cpu_only(project, monkeypatch):
    """tftrain's interpreter has tensorflow-cpu here: a use_gpu run of its release gets tensorflow[and-cuda]."""
    from runner.environments import virtualenv

    assert virtualenv.cpu_only_framework(), "the test environment has tensorflow-cpu"
    release = ".".join(installed_framework_version().split(".")[:2])
    for manifest in ("use_gpu: true\n", f"use_gpu: true\nframework_version: '{release}'\n"):
        spec = spec_for(project, manifest)
        assert spec.key is not None and spec.requirements[0] == f"tensorflow[and-cuda]=={release}.*", manifest
    assert spec_for(project, f"framework_version: '{release}'\n").key is None  # without use_gpu: its own
    monkeypatch.setattr(virtualenv, "cpu_only_framework", lambda: False)  # an interpreter with TensorFlow's GPU build
    assert spec_for(project, f"use_gpu: true\nframework_version: '{release}'\n").key is None
