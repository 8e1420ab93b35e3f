"""Kubeflow training-operator resources rendered from a LaunchPlan: a TFJob (Chief/PS/Worker/
Evaluator, the operator writes TF_CONFIG) or an MPIJob (Launcher/Worker, slotsPerWorker).

The pods run the image in the plan's container spec; on a cluster that image must also hold the
source snapshot at /workspace (see docs/kubernetes.md).
"""

from __future__ import annotations

import math
import re

import yaml

from runner.manifest.model import Manifest, MpiTraining
from runner.plan.model import LaunchPlan, SuccessPolicy, TaskSpec
from runner.targets.kubernetes.client import GROUP, VERSION
from runner.targets.kubernetes.pullsecret import annotations, pull_secrets

KUBEFLOW_API = f"{GROUP}/{VERSION}"
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator", "main": "Worker"}
SET_BY_OPERATOR = ("TF_CONFIG",)
LOCAL_ONLY = ("TFTRAIN_RANK", "TFTRAIN_METRICS_FILE")  # per-task on this machine; pods have their own identity


def secret_name(model: str) -> str:
    """The Secret that holds a model's `secrets:` for its pods."""
    return f"{model}-secrets"


def resource_name(manifest: Manifest, run_id: str) -> str:
    """A DNS-1123 name: lowercase letters, digits and dashes, at most 63 characters."""
    name = re.sub(r"[^a-z0-9]+", "-", f"{manifest.name}-{run_id}".lower()).strip("-")
    return name[:63].rstrip("-")


def render(plan: LaunchPlan, manifest: Manifest, run_id: str, namespace: str = "default") -> list[dict]:
    metadata = {
        "name": resource_name(manifest, run_id),
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "tftrain", "tftrain/model": manifest.name},
    }
    if manifest.image_registry is not None:
        metadata["annotations"] = annotations(manifest)
    if isinstance(manifest.distributed_training, MpiTraining):
        return [_mpijob(plan, manifest, metadata)]
    return [_tfjob(plan, manifest, metadata)]


def to_yaml(documents: list[dict]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False)


DEADLINE_MARGIN_SECONDS = 60


def _run_policy(manifest: Manifest) -> dict:
    policy: dict = {"cleanPodPolicy": "Running", "backoffLimit": 0}
    if manifest.max_run_duration_seconds:
        # tftrain's own clock ends the run (TimedOut); the operator's is a backstop for a tftrain
        # that is gone, so it is set later: the limit, the grace period to stop, and a margin
        policy["activeDeadlineSeconds"] = backstop_deadline(manifest)
    return policy


def backstop_deadline(manifest: Manifest) -> int:
    return manifest.max_run_duration_seconds + math.ceil(manifest.grace_seconds) + DEADLINE_MARGIN_SECONDS


def _tfjob(plan: LaunchPlan, manifest: Manifest, metadata: dict) -> dict:
    replicas: dict[str, dict] = {}
    for task in plan.tasks:
        kind = REPLICA_TYPES[task.role]
        if kind in replicas:
            replicas[kind]["replicas"] += 1
            continue
        replicas[kind] = {
            "replicas": 1,
            "restartPolicy": "Never",  # a task that dies fails the job, as on the local target
            "template": _pod_template(task, manifest, plan, "tensorflow", task.argv, gpus=1 if manifest.use_gpu else 0),
        }
    spec: dict = {"runPolicy": _run_policy(manifest), "tfReplicaSpecs": replicas}
    if plan.success_policy == SuccessPolicy.ALL_WORKERS:  # else the operator's default: the chief (or worker 0)
        spec["successPolicy"] = "AllWorkers"
    return {"apiVersion": KUBEFLOW_API, "kind": "TFJob", "metadata": metadata, "spec": spec}


def _mpijob(plan: LaunchPlan, manifest: Manifest, metadata: dict) -> dict:
    training = manifest.distributed_training
    per_node = training.process_count_per_node
    launcher_argv = _launcher_argv(plan.driver.argv)
    gpus = per_node if manifest.use_gpu else 0
    worker_argv = ("/usr/sbin/sshd", "-De")  # the launcher reaches the workers over ssh
    spec = {
        "slotsPerWorker": per_node,
        "runPolicy": _run_policy(manifest),
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": _pod_template(plan.driver, manifest, plan, "mpi-launcher", launcher_argv, gpus=0),
            },
            "Worker": {
                "replicas": manifest.node_count,
                "restartPolicy": "Never",
                "template": _pod_template(plan.tasks[0], manifest, plan, "mpi-worker", worker_argv, gpus=gpus),
            },
        },
    }
    return {"apiVersion": KUBEFLOW_API, "kind": "MPIJob", "metadata": metadata, "spec": spec}


def _launcher_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """mpirun as planned, minus the hosts: the operator hands the launcher its hostfile."""
    out, index = [], 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("-H", "--hostfile") or (arg == "-x" and argv[index + 1] in LOCAL_ONLY):
            index += 2
            continue
        if arg != "--oversubscribe":
            out.append(arg)
        index += 1
    return tuple(out)


def _pod_template(task: TaskSpec, manifest: Manifest, plan: LaunchPlan, container: str, argv, gpus: int) -> dict:
    env = []
    for key, value in sorted(task.env.items()):
        if key in SET_BY_OPERATOR or key in LOCAL_ONLY:
            continue
        if key in plan.secret_names:  # from a Kubernetes Secret, never written here
            env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": secret_name(manifest.name), "key": key}}})
        else:
            env.append({"name": key, "value": value})
    spec_container: dict = {
        "name": container,
        "image": plan.container.image if plan.container else "",
        "command": list(argv[:1]),
        "args": list(argv[1:]),
        "workingDir": task.cwd,
        "env": env,
    }
    if gpus:
        spec_container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    pod: dict = {"containers": [spec_container]}
    if manifest.image_registry is not None:
        pod["imagePullSecrets"] = pull_secrets(manifest)
    if manifest.shm_size:
        spec_container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(manifest.shm_size)}}]
    return {"metadata": {"labels": {"app.kubernetes.io/managed-by": "tftrain"}}, "spec": pod}


def _quantity(size: str) -> str:
    """Docker's 2g / 512m → Kubernetes' 2Gi / 512Mi."""
    units = {"k": "Ki", "m": "Mi", "g": "Gi"}
    suffix = size[-1].lower()
    return size[:-1] + units[suffix] if suffix in units else size
