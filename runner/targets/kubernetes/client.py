"""A Kubeflow job on a cluster, through the official kubernetes client (runner.shared.kube_api):
create, watch, stream pod logs, delete. The training-operator labels every pod with its job,
replica type and index."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from runner.shared.kube_api import KubeObject, kubernetes_module

GROUP, VERSION = "kubeflow.org", "v1"
PLURALS = {"TFJob": "tfjobs", "MPIJob": "mpijobs"}
JOB_LABEL = "training.kubeflow.org/job-name"
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"


@dataclass(frozen=True)
class Pod:
    name: str
    replica_type: str  # lowercase, as the operator writes it: chief, worker, ps, evaluator, launcher
    index: int
    phase: str
    container: str


class KubeJob(KubeObject):
    def __init__(self, kubeconfig: Path, document: dict) -> None:
        super().__init__(kubeconfig, document)
        self.core = kubernetes_module().client.CoreV1Api(self.api_client)
        self.plural = PLURALS[document["kind"]]
        self.container = "tensorflow" if document["kind"] == "TFJob" else None

    def apply_secret(self, name: str, values: dict[str, str], secret_type: str = "Opaque") -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": self.namespace},
            "type": secret_type,
            "stringData": values,
        }
        what = f"Secret {self.namespace}/{name}"
        if (
            self._call(f"creating {what}", self.core.create_namespaced_secret, self.namespace, body, tolerate=409)
            is None
        ):
            self._call(f"updating {what}", self.core.replace_namespaced_secret, name, self.namespace, body)

    def create(self) -> None:
        self._call(
            f"creating {self.label}",
            self.custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            self.plural,
            self.document,
        )

    def status(self) -> tuple[str | None, str]:
        """("Succeeded" | "Failed" | None while running, the operator's message)."""
        job = self._call(
            f"reading {self.label}",
            self.custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            self.plural,
            self.name,
        )
        for condition in reversed((job.get("status") or {}).get("conditions") or []):
            if condition.get("status") == "True" and condition.get("type") in ("Succeeded", "Failed"):
                return condition["type"], condition.get("message", "")
        return None, ""

    def pods(self) -> list[Pod]:
        listing = self._call(
            f"listing the pods of {self.label}",
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=f"{JOB_LABEL}={self.name}",
        )
        pods = []
        for item in listing.items:
            labels = item.metadata.labels or {}
            container = self.container or item.spec.containers[0].name
            pods.append(
                Pod(
                    item.metadata.name,
                    labels.get(TYPE_LABEL, ""),
                    int(labels.get(INDEX_LABEL, 0)),
                    item.status.phase,
                    container,
                )
            )
        return pods

    def stream_logs(self, pod: Pod, fd: int) -> threading.Thread:
        """Copy the pod's log into `fd` as it grows, until the container ends."""

        def copy() -> None:
            try:
                response = self.core.read_namespaced_pod_log(
                    pod.name, self.namespace, container=pod.container, follow=True, _preload_content=False
                )
                for chunk in response.stream(1 << 16):
                    os.write(fd, chunk)
            except Exception:  # the pod went away; what arrived is in the log
                pass
            finally:
                os.close(fd)

        thread = threading.Thread(target=copy, name=f"pod-log-{pod.name}", daemon=True)
        thread.start()
        return thread

    def delete(self) -> None:
        self._call(
            f"deleting {self.label}",
            self.custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            self.plural,
            self.name,
            tolerate=404,
        )
