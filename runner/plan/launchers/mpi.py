"""MPI / Horovod: N×K ranks started by one `mpirun` (or `horovodrun`), as horovodrun itself does.

Variables reach the ranks by name (`-x NAME`), their values through mpirun's environment, so no
value (a secret included) is ever in an argv. Ranks' output comes back tagged (`--tag-output`)
and is split into one log per rank.
"""

from __future__ import annotations

import os

from runner.manifest.legacy_keras import legacy_env
from runner.plan.model import LaunchPlan, PlanContext, Role, TaskSpec, check_metrics_ranks

name = "mpi"
OPEN_MPI_FLAGS = ("-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1", "-mca", "btl", "^openib")
NEVER_EXPORTED = ("CUDA_VISIBLE_DEVICES",)  # each host decides its own GPUs


def plan(ctx: PlanContext) -> LaunchPlan:
    training = ctx.manifest.distributed_training
    per_node = training.process_count_per_node
    nodes = _nodes(ctx)
    size = sum(nodes.values()) * per_node
    # Horovod's Keras API needs tf-keras on TF ≥ 2.16 (runner/manifest/legacy_keras.py)
    env = legacy_env(ctx.manifest, {**ctx.env, "TFTRAIN_METRICS_FILE": ctx.runtime.metrics_file("{rank}")})
    if training.network_interface and training.launcher != "horovodrun":
        env["NCCL_SOCKET_IFNAME"] = training.network_interface
    tasks = []
    rank = 0
    for host, count in nodes.items():
        for _ in range(count * per_node):
            # every rank gets mpirun's environment; its rank comes from OMPI_COMM_WORLD_RANK
            tasks.append(TaskSpec(Role.RANK, rank, rank, host, ctx.script_argv, env, ctx.runtime.workdir))
            rank += 1
    hosts_arg = ",".join(f"{host}:{count * per_node}" for host, count in nodes.items())
    files = {}
    ssh_port = training.ssh_port or (ctx.placement.ssh_port if ctx.placement else None)
    if training.launcher == "horovodrun":
        argv = ["horovodrun", "-np", str(size), "-H", hosts_arg]
        if ssh_port:
            argv += ["--ssh-port", str(ssh_port)]
        if training.network_interface:
            argv += ["--network-interface", training.network_interface]
    else:
        argv = ["mpirun", "--allow-run-as-root", "--tag-output", "-np", str(size)]
        if training.hostfile:
            files["hostfile"] = "".join(f"{host} slots={count * per_node}\n" for host, count in nodes.items())
            argv += ["--hostfile", f"{ctx.runtime.launch_dir}/hostfile"]
        else:
            argv += ["-H", hosts_arg]
        if size > (os.cpu_count() or 1) and set(nodes) == {"localhost"}:
            argv.append("--oversubscribe")
        argv += OPEN_MPI_FLAGS
        if ssh_port:
            argv += ["-mca", "plm_rsh_args", f"-p {ssh_port}"]
        if training.network_interface:
            argv += ["-mca", "btl_tcp_if_include", training.network_interface]
        for key in sorted(env):
            if key not in NEVER_EXPORTED:
                argv += ["-x", key]
    argv += [*training.mpi_args, *ctx.script_argv]
    driver = TaskSpec(Role.LAUNCHER, 0, -1, next(iter(nodes)), tuple(argv), env, ctx.runtime.workdir)
    return LaunchPlan(
        launcher=name,
        target=ctx.target,
        tasks=tuple(tasks),
        metrics_ranks=check_metrics_ranks(ctx.manifest, size),
        driver=driver,
        files=files,
    )


def _nodes(ctx: PlanContext) -> dict[str, int]:
    """host → how many of the job's nodes it is: all of them localhost, unless a pool placed them."""
    if ctx.placement is None:
        return {"localhost": ctx.manifest.node_count}
    return {ctx.placement.address(f"node {i}"): 1 for i in range(ctx.manifest.node_count)}
