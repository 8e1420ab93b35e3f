"""A KServe v1beta1 InferenceService for a pushed serving image: rendered as plain data (printed
by `tftrain deploy --target kubernetes`), and applied (created, or replaced when it exists)
through the Kubernetes API of a kubeconfig, as the kubernetes target talks to it.

With an auth secret, the container's TFTRAIN_SERVING_TOKEN comes from that secret's key `token`
(env valueFrom secretKeyRef): the rendered document names the secret, never holds the key. With a
verifier (deploy --verify-key), an init container of the same image checks the version's files
against their model.sig before the server starts (runner.serving.verify_model)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from runner.errors import DeployError
from runner.serving.guard import TOKEN_VARIABLE
from runner.serving.image import PORT, ServingResources
from runner.serving.verify_model import Verifier
from runner.shared.kube_api import KubeObject

GROUP, VERSION, PLURAL, KIND = "serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService"
CONTAINER = "kserve-container"  # KServe treats a container of any other name as a sidecar
SECRET_KEY = "token"  # kubectl create secret generic NAME --from-literal=token=KEY
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def service_name(model_name: str) -> str:
    """The model's name as a DNS-1035 label (KServe's rule for an InferenceService's name)."""
    name = re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")[:63].rstrip("-")
    if not DNS_1035.match(name):
        raise DeployError(
            f"model name {model_name!r} makes no valid InferenceService name: give one with --service-name"
        )
    return name


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    namespace: str
    image: str  # by digest: REPOSITORY@sha256:…
    resources: ServingResources
    labels: dict  # model name, version, commit
    auth_secret: str | None = None  # the Kubernetes secret whose key `token` the server requires
    verifier: Verifier | None = None  # an init container verifies the version against its model.sig first

    def document(self) -> dict:
        amounts = {"cpu": self.resources.cpu, "memory": self.resources.memory}
        limits = {**amounts, **({"nvidia.com/gpu": str(self.resources.gpu)} if self.resources.gpu else {})}
        container = {
            "name": CONTAINER,
            "image": self.image,
            "ports": [{"containerPort": PORT, "protocol": "TCP"}],
            "resources": {"requests": dict(amounts), "limits": limits},
        }
        if self.auth_secret:
            reference = {"secretKeyRef": {"name": self.auth_secret, "key": SECRET_KEY}}
            container["env"] = [{"name": TOKEN_VARIABLE, "valueFrom": reference}]
        predictor = {"minReplicas": 1, "containers": [container]}
        if self.verifier is not None:  # the same image by digest: the files it verifies are the server's
            predictor["initContainers"] = [
                self.verifier.container(self.image, {"requests": dict(amounts), "limits": dict(amounts)})
            ]
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(self.labels)},
            "spec": {"predictor": predictor},
        }


def to_yaml(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


class ServiceClient(KubeObject):
    """An InferenceService on the cluster of a kubeconfig."""

    def apply(self) -> str:
        """Create the service, or replace the one of that name; "created" or "replaced"."""
        api = self.custom
        created = self._call(
            f"creating {self.label}",
            api.create_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            PLURAL,
            self.document,
            tolerate=409,
        )
        if created is not None:
            return "created"
        current = self._call(
            f"reading {self.label}", api.get_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL, self.name
        )
        # a replace names the version it replaces: a change made meanwhile is refused (409), not lost
        metadata = {
            **self.document["metadata"],
            "resourceVersion": (current.get("metadata") or {}).get("resourceVersion"),
        }
        body = {**self.document, "metadata": metadata}
        self._call(
            f"replacing {self.label}",
            api.replace_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            PLURAL,
            self.name,
            body,
        )
        return "replaced"
