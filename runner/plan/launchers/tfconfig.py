"""TF_CONFIG for native distributed TensorFlow, in the format Kubeflow's operator writes."""

from __future__ import annotations

import json
import socket
from contextlib import ExitStack

from runner.errors import PlanError
from runner.manifest.legacy_keras import legacy_env
from runner.plan.model import PlanContext, Role, TaskSpec

LOCAL_ADDRESS = "127.0.0.1"
# ParameterServerStrategy hangs with one inter-op thread; one intra-op thread per process keeps
# several processes on a small machine from fighting over cores.
THREAD_DEFAULTS = {"TF_NUM_INTEROP_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "1", "OMP_NUM_THREADS": "1"}


def ports(count: int, base_port: int | None) -> list[int]:
    """`count` ports: base_port, base_port+1, … (refused if one is taken), or free ones, all
    reserved at once so two tasks never get the same port."""
    with ExitStack() as stack:
        found = []
        for index in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            port = 0 if base_port is None else base_port + index
            try:
                sock.bind((LOCAL_ADDRESS, port))
            except OSError:
                raise PlanError(
                    f"distributed_training.base_port: port {port} on {LOCAL_ADDRESS} is already in use"
                ) from None
            found.append(sock.getsockname()[1])
        return found


def tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    document = {
        "cluster": {key: cluster[key] for key in sorted(cluster)},
        "task": {"type": task_type, "index": index},
        "environment": "cloud",
    }
    return json.dumps(document)


def tasks_for(
    ctx: PlanContext, roles: list[tuple[str, int]], cluster_roles: set[str], base_port: int | None
) -> list[TaskSpec]:
    """One task per (role, index), in order; rank = position. `cluster_roles` are listed in TF_CONFIG."""
    hosts, addresses = _addresses(ctx, roles, base_port)
    cluster: dict[str, list[str]] = {}
    for (role, _), address in zip(roles, addresses):
        if role in cluster_roles:
            cluster.setdefault(role, []).append(address)
    user = ctx.manifest.environment_variables
    defaults = {key: value for key, value in THREAD_DEFAULTS.items() if key not in user}
    shared = legacy_env(ctx.manifest, ctx.env)  # Keras 3 cannot train under these strategies: tf-keras
    tasks = []
    for rank, (role, index) in enumerate(roles):
        env = {
            **defaults,
            **shared,
            "TF_CONFIG": tf_config(cluster, role, index),
            "TFTRAIN_RANK": str(rank),
            "TFTRAIN_METRICS_FILE": ctx.runtime.metrics_file(rank),
        }
        tasks.append(TaskSpec(Role(role), index, rank, hosts[rank], ctx.script_argv, env, ctx.runtime.workdir))
    return tasks


def _addresses(ctx: PlanContext, roles: list[tuple[str, int]], base_port: int | None) -> tuple[list[str], list[str]]:
    """Each task's host and TF_CONFIG address: free ports on this machine, or on a pool's
    hosts base_port, base_port+1, … per host (their ports cannot be probed from here)."""
    if ctx.placement is None:
        return [LOCAL_ADDRESS] * len(roles), [f"{LOCAL_ADDRESS}:{port}" for port in ports(len(roles), base_port)]
    first = base_port or ctx.placement.base_port
    taken: dict[str, int] = {}
    hosts, addresses = [], []
    for role, index in roles:
        key = f"{role} {index}"
        name, address = ctx.placement.name(key), ctx.placement.address(key)
        port = first + taken.get(name, 0)
        taken[name] = taken.get(name, 0) + 1
        hosts.append(name)
        addresses.append(f"{address}:{port}")
    return hosts, addresses
