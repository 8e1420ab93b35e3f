"""The KServe InferenceService deploy renders, and the command line's refusals."""

from __future__ import annotations

import pytest
import yaml
from conftest import tftrain

from runner.errors import DeployError
from runner.serving.image import ServingResources
from runner.serving.inference_service import ServiceSpec, service_name, to_yaml


def test_inference_service_document():
    spec = ServiceSpec(
        "digits",
        "serving",
        "r.example/d@sha256:" + "0" * 64,
        ServingResources("500m", "1Gi", 0),
        {"tftrain/version": "v2"},
    )
    document = yaml.safe_load(to_yaml(spec.document()))
    assert document["apiVersion"] == "serving.kserve.io/v1beta1" and document["kind"] == "InferenceService"
    assert document["metadata"] == {"name": "digits", "namespace": "serving", "labels": {"tftrain/version": "v2"}}
    (container,) = document["spec"]["predictor"]["containers"]
    assert container["name"] == "kserve-container" and "@sha256:" in container["image"]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "500m", "memory": "1Gi"},
    }
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]


def test_service_names_are_dns_labels():
    assert service_name("Digits_Model.v2") == "digits-model-v2"
    with pytest.raises(DeployError, match="--service-name"):
        service_name("2024")


def test_command_line_refusals(home):
    result = tftrain("deploy", "digits@v1", "--image", "r.example/x", "--kubeconfig", "k")
    assert result.returncode == 2 and "add --target kubernetes" in result.stderr
    result = tftrain(
        "deploy", "digits@v1", "--image", "r.example/X"
    )  # a bad option: a usage error, before the registry
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "must be lowercase" in result.stderr
    result = tftrain("deploy", "digits@v1", "--image", "r.example/x")
    assert result.returncode == 5 and "model digits@v1 is not registered" in result.stderr


@pytest.mark.parametrize("name", ["2024", "---", "", "_9"])
def test_a_bad_service_name_is_refused_before_anything_is_looked_up_or_built(home, name):
    result = tftrain(
        "deploy", "digits@v1", "--image", "r.example/x", "--push", "--target", "kubernetes", f"--service-name={name}"
    )
    assert result.returncode == 2, result.stderr  # before the registry: an unregistered model would be exit 5
    assert result.stderr.count("\n") == 1 and f"--service-name {name!r} makes no InferenceService name" in result.stderr


def test_service_name_needs_the_kubernetes_target(home):
    result = tftrain("deploy", "digits@v1", "--image", "r.example/x", "--service-name", "digits")
    assert (
        result.returncode == 2 and "--service-name names an InferenceService: add --target kubernetes" in result.stderr
    )


def test_a_model_name_that_makes_no_service_name_is_refused_before_the_daemon_is_asked(home, tmp_path, monkeypatch):
    import runner.environments
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    (tmp_path / "model.keras").write_bytes(b"weights")
    with Store(home) as store:
        Registry(store).register("2024", tmp_path / "model.keras", None, {})
    monkeypatch.setattr(
        runner.environments,
        "docker_client",
        lambda: pytest.fail("the image was built before the service's name was checked"),
    )
    result = tftrain("deploy", "2024@v1", "--image", "r.example/x", "--push", "--target", "kubernetes")
    assert result.returncode == DeployError.exit_code == 27, result.stderr
    assert (
        result.stderr.count("\n") == 1
        and "makes no valid InferenceService name: give one with --service-name" in result.stderr
    )
