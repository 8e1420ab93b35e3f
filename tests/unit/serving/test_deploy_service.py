"""The KServe InferenceService deploy renders, and the command line's refusals."""

from __future__ import annotations

import yaml

import pytest

from conftest import tftrain
from runner.errors import DeployError
from runner.serving.image import ServingResources
from runner.serving.inference_service import ServiceSpec, service_name, to_yaml


def test_inference_service_document():
    spec = ServiceSpec("digits", "serving", "r.example/d@sha256:" + "0" * 64, ServingResources("500m", "1Gi", 0), {"tftrain/version": "v2"})
    document = yaml.safe_load(to_yaml(spec.document()))
    assert document["apiVersion"] == "serving.kserve.io/v1beta1" and document["kind"] == "InferenceService"
    assert document["metadata"] == {"name": "digits", "namespace": "serving", "labels": {"tftrain/version": "v2"}}
    (container,) = document["spec"]["predictor"]["containers"]
    assert container["name"] == "kserve-container" and "@sha256:" in container["image"]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]


def test_service_names_are_dns_labels():
    assert service_name("Digits_Model.v2") == "digits-model-v2"
    with pytest.raises(DeployError, match="--service-name"):
        service_name("2024")


def test_command_line_refusals(home):
    result = tftrain("deploy", "digits@v1", "--image", "r.example/x", "--kubeconfig", "k")
    assert result.returncode == 2 and "add --target kubernetes" in result.stderr
    result = tftrain("deploy", "digits@v1", "--image", "r.example/X")  # a bad option: a usage error, before the registry
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "must be lowercase" in result.stderr
    result = tftrain("deploy", "digits@v1", "--image", "r.example/x")
    assert result.returncode == 5 and "model digits@v1 is not registered" in result.stderr
