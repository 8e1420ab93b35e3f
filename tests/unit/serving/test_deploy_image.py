"""The serving image as data: repository names, serving resources, the environment and model
Dockerfiles, tags and labels, and the version copied out for the build (verified)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from runner.errors import DeployError, RegistryError, UsageError
from runner.history.model_registry import Registry
from runner.history.store import Store
from runner.serving.image import ServingResources, copy_version, environment_spec, model_image_spec, server_command
from runner.serving.imageref import parse_reference, parse_repository


def base(text: str):
    return parse_reference(text, "--base-image")


def register(home: Path, tmp_path: Path, serving: bool = True, info: dict | None = None):
    source = tmp_path / "sm"
    (source / "variables").mkdir(parents=True)
    (source / "saved_model.pb").write_bytes(b"graph")
    (source / "variables" / "variables.data-00000-of-00001").write_bytes(b"weights")
    with Store(home) as store:
        model = Registry(store).register("digits", source, "run-1", {"git": {"commit": "abc123"}, **(info or {})})
        record = dict(model.info)
        if serving:
            (model.path / "serving").mkdir()
            document = {
                "format": "saved_model",
                "path": ".",
                "signatures": {},
                "signature": "serving_default",
                "tensorflow": "2.17.1",
                "onnx": None,
            }
            (model.path / "serving" / "serving.json").write_text(json.dumps(document))
            (model.path / "serving" / "sample.npz").write_bytes(b"sample")
            (model.path / "model.onnx").write_bytes(b"onnx")
            files = {
                name: hashlib.sha256((model.path / name).read_bytes()).hexdigest()
                for name in ("serving/serving.json", "serving/sample.npz", "model.onnx")
            }
            record["serving"], record["extras"] = document, files
        store.db.execute("UPDATE models SET info = ? WHERE name = 'digits'", (json.dumps(record),))
        return Registry(store).get("digits", 1)


@pytest.mark.parametrize(
    "image", ["ghcr.io/owner/digits", "127.0.0.1:5000/team/digits", "digits", "registry.example/a/b_c/d-e.f"]
)
def test_repositories_that_push(image):
    assert parse_repository(image, "--image") == image


@pytest.mark.parametrize(
    "image",
    ["ghcr.io/Owner/digits", "registry.example/team/x:latest", "r.example/x@sha256:" + "a" * 64, "", "a//b", "-x/y"],
)
def test_repositories_refused_in_one_line(image):
    with pytest.raises(UsageError, match="^--image ") as raised:
        parse_repository(image, "--image")
    assert "\n" not in str(raised.value)
    if ":latest" in image or "@sha256" in image:
        assert "without a tag or digest" in str(raised.value)


def test_serving_resources_default_and_convert():
    assert ServingResources.of({}) == ServingResources("1", "2Gi", 0)
    resources = ServingResources.of({"serving_resources": {"cpu": "500m", "memory": "512Mi", "gpu": 1}})
    assert (resources.nano_cpus(), resources.memory_bytes(), resources.gpu) == (500_000_000, 512 * 2**20, 1)
    assert ServingResources.of({"serving_resources": {"cpu": 2, "memory": "1G"}}).memory_bytes() == 10**9
    with pytest.raises(DeployError, match="serving_resources.cpu 'lots'"):
        ServingResources.of({"serving_resources": {"cpu": "lots"}})
    with pytest.raises(DeployError, match="serving_resources.memory '2m'"):
        ServingResources.of({"serving_resources": {"memory": "2m"}})


def test_environment_is_tagged_by_its_content(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("CA")
    spec = environment_spec(base("python:3.11-slim-bookworm"), "sha256:base1", "2.18.1", False, ca)
    assert (
        "pip install -c /tmp/tftrain/tftrain-constraints.txt kserve==0.16.0 tensorflow-cpu==2.18.1\n" in spec.dockerfile
    )
    assert b"tensorflow-cpu==2.18.1\n" in spec.context()["tftrain-constraints.txt"]  # the tested set
    # not the set's patch
    assert "-c " not in environment_spec(base("python:3.11-slim-bookworm"), None, "2.18.0", False, None).dockerfile
    assert "USER 1000:1000" in spec.dockerfile and "COPY tftrain-ca.pem" in spec.dockerfile
    assert spec.context()["tftrain-ca.pem"] == b"CA"
    assert spec.tag.startswith("tftrain-serve/environment:")
    assert environment_spec(base("python:3.11-slim-bookworm"), "sha256:base1", "2.18.1", False, ca).tag == spec.tag
    assert environment_spec(base("python:3.11-slim-bookworm"), "sha256:base2", "2.18.1", False, ca).tag != spec.tag
    with_onnx = environment_spec(base("python:3.11-slim-bookworm"), "sha256:base1", "2.18.1", True, ca)
    assert "onnxruntime" in with_onnx.dockerfile and with_onnx.tag != spec.tag


def test_model_image_tags_labels_and_command(tmp_path):
    model = register(tmp_path / "home", tmp_path)
    files = copy_version(model, tmp_path / "version")
    assert files.onnx and files.tensorflow == "2.17.1" and files.sample.name == "sample.npz"
    environment = environment_spec(base("base:1"), "sha256:b", files.tensorflow, files.onnx, None)
    image = model_image_spec(files, "r.example/team/digits", environment, "sha256:env", "base:1")
    assert image.tags[1] == "r.example/team/digits:digits-v1" and image.tags[0].startswith("r.example/team/digits:sha-")
    spec = image.spec
    assert spec.labels["tftrain.model.sha256"] == hashlib.sha256((model.path / "SHA256SUMS").read_bytes()).hexdigest()
    assert spec.labels["org.opencontainers.image.revision"] == "abc123" == spec.labels["tftrain.model.commit"]
    assert spec.labels["org.opencontainers.image.version"] == "v1"
    assert {
        "version/model/saved_model.pb",
        "version/serving/serving.json",
        "version/model.onnx",
        "runner/serving/image.py",
    } <= set(spec.files)
    assert f"CMD {json.dumps(server_command('digits'))}" in spec.dockerfile
    assert "--host 0.0.0.0" in " ".join(server_command("digits")) and "COPY version /models/digits" in spec.dockerfile
    # the same content is the same tag; another environment is another
    assert model_image_spec(files, "r.example/team/digits", environment, "sha256:env", "base:1").tags == image.tags
    assert (
        model_image_spec(files, "r.example/team/digits", environment, "sha256:env2", "base:1").tags[0] != image.tags[0]
    )


def test_a_serving_file_that_does_not_match_is_damage(tmp_path):
    model = register(tmp_path / "home", tmp_path)
    (model.path / "serving" / "sample.npz").write_bytes(b"changed")
    with pytest.raises(
        RegistryError, match=r"model digits@v1 is damaged: serving/sample.npz is not what version.json says"
    ):
        copy_version(model, tmp_path / "version")


def test_a_version_from_before_serving_is_located(tmp_path):
    model = register(tmp_path / "home", tmp_path, serving=False)
    files = copy_version(model, tmp_path / "version")
    assert files.serving is None and files.sample is None and not files.onnx


def test_a_version_with_nothing_to_serve_is_refused(tmp_path):
    source = tmp_path / "weights"
    source.mkdir()
    (source / "model.ckpt").write_bytes(b"x")
    with Store(tmp_path / "home") as store:
        model = Registry(store).register("digits", source, None, {})
    with pytest.raises(DeployError, match="holds no SavedModel or .keras/.h5 file"):
        copy_version(model, tmp_path / "version")
