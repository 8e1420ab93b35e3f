"""The Kubernetes API through the official client, one object at a time, every failure one line:
the kubernetes target's jobs (kubernetes/client.py) and `tftrain deploy`'s InferenceService
(runner.serving.inference_service) are both a KubeObject. Not a backend: the client is imported
only when an object is made."""

from __future__ import annotations

from pathlib import Path

from runner.errors import ClusterError, answered, one_line, unreachable


def kubernetes_module():
    try:
        import kubernetes
    except ImportError:
        raise ClusterError(
            "compute.target: kubernetes needs the kubernetes client: pip install 'tf-train-action[kubernetes]'"
        ) from None
    return kubernetes


class KubeObject:
    """One custom object (`document`) on the cluster of a kubeconfig, and calls that fail in one line."""

    def __init__(self, kubeconfig: Path, document: dict) -> None:
        kubernetes = kubernetes_module()
        self.errors = kubernetes.client.exceptions.ApiException
        try:
            self.api_client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        except Exception as exc:  # kubernetes.config.ConfigException and friends
            raise ClusterError(f"{kubeconfig}: cannot use this kubeconfig: {exc}") from None
        self.custom = kubernetes.client.CustomObjectsApi(self.api_client)
        self.document = document
        self.name = document["metadata"]["name"]
        self.namespace = document["metadata"]["namespace"]
        self.label = f"{document['kind']} {self.namespace}/{self.name}"

    def _call(self, what: str, function, *args, tolerate: int | None = None, **kwargs):
        """function(*args, **kwargs); None when the API answers `tolerate` (409 to a create: it exists,
        404 to a delete: it is gone); any other failure is a ClusterError naming the call."""
        import urllib3

        try:
            return function(*args, **kwargs)
        except self.errors as exc:
            if tolerate is not None and exc.status == tolerate:
                return None
            if not exc.status:  # no answer: TLS failed, or the request could not be made
                raise ClusterError(f"Kubernetes: {what}: {one_line(str(exc.reason))}") from None
            raise ClusterError(answered("Kubernetes", what, exc.status, _message(exc), reason=exc.reason)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # retries ran out: MaxRetryError and friends
            raise ClusterError(unreachable("Kubernetes", what, exc)) from None


def _message(exc) -> str:
    import json

    try:
        return json.loads(exc.body).get("message", exc.body)
    except (TypeError, ValueError):
        return str(exc.body or "")
