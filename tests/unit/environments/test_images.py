from __future__ import annotations

import jinja2
import pytest

from runner.environments.images import image_spec
from runner.errors import UnsupportedError
from runner.manifest import load_manifest
from runner.templates import render

DOCKER = "use_docker: true\ncustom_docker_image: base:1\nframework_version: '2.18'\n"


def spec(project, manifest: str = "", script: str = "print('hi')\n", **kwargs):
    return image_spec(load_manifest(project(script=script, manifest=DOCKER + manifest)), **kwargs)


def test_layers_in_order_and_no_source_code(project):
    dockerfile = spec(project, "pip_packages: [scikit-learn]\n").dockerfile
    assert (
        dockerfile.index("FROM base:1")
        < dockerfile.index("python3 -m venv")
        < dockerfile.index("'tensorflow-cpu==2.18.*'")
    )
    assert dockerfile.index("'tensorflow-cpu==2.18.*'") < dockerfile.index("requirements.txt")
    assert "train.py" not in dockerfile and "COPY . " not in dockerfile


def test_tag_follows_the_environment_not_the_code(project, tmp_path):
    first = spec(project, "pip_packages: [scikit-learn]\n")
    assert spec(project, "pip_packages: [scikit-learn]\n", script="print('changed code')\n").tag == first.tag
    assert spec(project, "pip_packages: [scikit-learn, six]\n").tag != first.tag
    assert spec(project, "pip_packages: [scikit-learn]\n", base_image_id="sha256:other").tag != first.tag
    assert spec(project, "pip_packages: [scikit-learn]\n", ca_bundle=None).tag == first.tag
    assert first.tag.startswith("tftrain/demo:")


def test_requirements_file_content_is_in_the_tag(project, tmp_path):
    path = project(manifest=DOCKER + "pip_requirements_file: requirements.txt\n")
    (path.parent / "src" / "requirements.txt").write_text("six\n")
    first = image_spec(load_manifest(path))
    (path.parent / "src" / "requirements.txt").write_text("six==1.16.0\n")
    second = image_spec(load_manifest(path))
    assert first.tag != second.tag
    assert second.files["requirements.txt"] == b"six==1.16.0\n"
    assert "COPY requirements.txt /tmp/tftrain/requirements.txt" in second.dockerfile


def test_ca_bundle_only_in_the_thrown_away_stage(project, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    image = spec(project, "pip_packages: [six]\n", ca_bundle=ca)
    final_stage = image.dockerfile.rsplit("FROM base\n", 1)[1]
    assert "ca.pem" not in final_stage and "PIP_CERT" not in final_stage
    assert image.context()["tftrain-ca.pem"] == ca.read_bytes()


def test_mpi_layer_for_horovod_jobs(project):
    dockerfile = spec(project, "distributed_training:\n  backend: mpi\n").dockerfile
    assert (
        "openmpi-bin" in dockerfile
        and "HOROVOD_WITH_TENSORFLOW=1" in dockerfile
        and "--no-build-isolation horovod==0.28.1" in dockerfile
        and "tf-keras==2.18.*" in dockerfile
    )
    assert "openmpi-bin" not in spec(project).dockerfile


def test_conda_needs_conda_in_the_base(project):
    dockerfile = spec(project, "conda_packages: [numpy=1.26]\n").dockerfile
    assert (
        "command -v conda" in dockerfile and "conda install --yes --prefix /opt/tftrain/conda numpy=1.26" in dockerfile
    )


def test_official_image_by_framework_version(project):
    path = project(manifest="use_docker: true\nframework_version: '2.17'\nuse_gpu: true\n")
    image = image_spec(load_manifest(path))
    assert image.base_image == "tensorflow/tensorflow:2.17.0-gpu"
    assert "pip install 'tensorflow" not in image.dockerfile  # the official image has it


def test_unknown_framework_version_needs_a_custom_image(project):
    with pytest.raises(UnsupportedError, match="no default image is known for TensorFlow 2.9"):
        image_spec(load_manifest(project(manifest="use_docker: true\nframework_version: '2.9'\n")))


def test_environment_variables_and_secrets_are_not_baked_in(project, monkeypatch):
    dockerfile = spec(project, "environment_variables:\n  MY_VALUE: visible\nsecrets: [MY_TOKEN]\n").dockerfile
    assert "MY_VALUE" not in dockerfile and "MY_TOKEN" not in dockerfile


def test_templates_are_strict():
    with pytest.raises(jinja2.UndefinedError):
        render("Dockerfile.j2", base_image="x")


def test_the_framework_pin_and_tf_keras_follow_the_manifest(project):
    horovod = (
        "use_docker: true\ncustom_docker_image: base:1\nframework_version: '2.15'\ndistributed_training:\n  backend:"
        " mpi\n"
    )
    dockerfile = image_spec(load_manifest(project(manifest=horovod))).dockerfile
    assert "horovod==0.28.1" in dockerfile and "tf-keras" not in dockerfile  # Keras 2: Horovod's Keras API works
    listed = spec(project, "pip_packages: ['tensorflow==2.18.1']\n").dockerfile
    assert "tensorflow-cpu" not in listed and "'tensorflow==2.18.1'" not in listed.split("requirements.txt")[0]
    official = image_spec(load_manifest(project(manifest="use_docker: true\nframework_version: '2.18'\n"))).dockerfile
    assert "'tensorflow-cpu==2.18.*'" not in official


def test_a_failed_build_names_its_step_and_cause(tmp_path):
    import io
    from types import SimpleNamespace

    from runner.environments.image_build import _build
    from runner.errors import BuildError
    from runner.telemetry.logger import Logger

    chunks = [
        {"stream": "Step 1/3 : FROM base:1\n ---> 1234\n"},
        {"stream": "Step 2/3 : RUN pip install nothing\n"},
        {"stream": "\x1b[91mERROR: No matching distribution found for nothing\n\x1b[0m"},
        {"error": "The command '/bin/sh -c pip install nothing' returned a non-zero code: 1"},
    ]
    client = SimpleNamespace(api=SimpleNamespace(build=lambda **kwargs: iter(chunks)))
    log_path = tmp_path / "build.log"
    stream = io.StringIO()
    logger = Logger(stream)
    with pytest.raises(BuildError) as failure:
        _build(client, io.BytesIO(), "tftrain/x:1", {}, "FROM base:1\n", logger, log_path)
    logger.flush()
    assert (
        str(failure.value)
        == "docker build failed at Step 2/3 : RUN pip install nothing: ERROR: No matching distribution found for"
        f" nothing (full log: {log_path})"
    )
    assert log_path.read_text().startswith("--- Dockerfile for tftrain/x:1\nFROM base:1\n--- build\nStep 1/3")
    assert (
        "  ERROR: No matching distribution found for nothing\n" in stream.getvalue()
        and "\x1b[" not in stream.getvalue()
    )


def test_a_custom_image_installs_everything_with_the_tested_set(project, tmp_path):
    from runner.frameworks.curated import constraint_set

    (tmp_path / "project" / "src").mkdir(parents=True)
    (tmp_path / "project" / "src" / "requirements.txt").write_text("numpy<2\n")  # the user's numpy wins
    image = spec(project, "pip_packages: [six]\npip_requirements_file: requirements.txt\n")
    assert "COPY tftrain-constraints.txt /tmp/tftrain/tftrain-constraints.txt" in image.dockerfile
    assert (
        "pip install -c /tmp/tftrain/tftrain-constraints.txt 'tensorflow-cpu==2.18.*' tensorboard\n" in image.dockerfile
    )
    assert "pip install -c /tmp/tftrain/tftrain-constraints.txt -r /tmp/tftrain/requirements.txt" in image.dockerfile
    assert image.files["tftrain-constraints.txt"].decode() == constraint_set("2.18").constraints(
        frozenset({"six", "numpy"})
    )
    assert "import tensorboard" not in image.dockerfile  # installed with TensorFlow above


def test_an_official_image_keeps_its_tensorflow_and_gets_tensorboard_where_it_lacks_it(project):
    from runner.frameworks.curated import constraint_set

    loaded = load_manifest(project(manifest="use_docker: true\nframework_version: '2.21'\npip_packages: [six]\n"))
    image = image_spec(loaded)
    assert image.base_image == "tensorflow/tensorflow:2.21.0" and "tftrain-constraints.txt" not in image.files
    wanted = f"tensorboard=={constraint_set('2.21').pin('tensorboard')}"
    assert (
        f'python -c "import tensorboard" 2>/dev/null || /opt/tftrain/venv/bin/python -m pip install {wanted}\n'
        in image.dockerfile
    )
