"""The Slurm job of a plan: what it asks for (BatchRequest, from the manifest alone, so that `check`
can ask `sbatch --test-only` before anything is recorded), how its tasks start (Launch: srun, or
mpirun inside the allocation), the batch script (templates/slurm_batch.sh.j2) and tasks.json."""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from runner.manifest.model import Manifest
from runner.plan.launchers.mpi import OPEN_MPI_FLAGS
from runner.plan.layout import task_layout
from runner.plan.model import LaunchPlan, Role
from runner.templates import render

RANK_PY = str(Path(__file__).with_name("rank.py"))
TASK_KEYS = ("TFTRAIN_RANK", "TFTRAIN_METRICS_FILE", "TF_CONFIG")  # what differs between tasks: built by rank.py
SERVER_ROLES = frozenset({Role.CHIEF, Role.PS})  # a heterogeneous job's first component: no GPUs


@dataclass(frozen=True, slots=True)
class BatchRequest:
    job_name: str
    comment: str
    nodes: int
    ntasks: int
    ntasks_per_node: int  # 0: tasks that do not divide evenly over the nodes
    cpus_per_task: int
    gpus_per_node: int
    time_minutes: int  # 0: no limit
    signal_seconds: int
    placement: tuple[str, ...]  # --partition=…, --account=…, --qos=…, --constraint=…
    extra_args: tuple[str, ...]
    requeue: bool = False  # compute.slurm.time_limit: at it (or preemption) the job is requeued, not ended
    # compute.slurm.heterogeneous: each component's own request (nodes, tasks, GPUs, partition); the
    # fields above are then the whole job's
    components: tuple[BatchRequest, ...] = ()

    def parts(self) -> tuple[BatchRequest, ...]:
        """What sbatch is asked, component by component (one part unless the job is heterogeneous)."""
        return self.components or (self,)

    def options(self) -> list[str]:
        """The request as sbatch options (for `sbatch --test-only`); ":" between a heterogeneous
        job's components, as sbatch's command line takes them (the batch script: `#SBATCH hetjob`)."""
        if self.components:
            return [option for index, part in enumerate(self.components) for option in [":"][:index] + part.options()]
        options = [
            f"--job-name={self.job_name}",
            f"--nodes={self.nodes}",
            f"--ntasks={self.ntasks}",
            f"--cpus-per-task={self.cpus_per_task}",
        ]
        if self.ntasks_per_node:
            options.append(f"--ntasks-per-node={self.ntasks_per_node}")
        if self.time_minutes:
            options.append(f"--time={self.time_minutes}")
        if self.gpus_per_node:
            options.append(f"--gres=gpu:{self.gpus_per_node}")
        return [*options, *self.placement, *self.extra_args]


class LaunchMode(str, Enum):
    SRUN = "srun"  # one rank.py per task
    SRUN_PMIX = "srun-pmix"  # MPI ranks through srun
    MPIRUN = "mpirun"  # one mpirun inside the allocation: its exit status is the job's


@dataclass(frozen=True, slots=True)
class Launch:
    mode: LaunchMode
    line: str  # the batch script's launch line, shell-quoted


def roles_of(manifest: Manifest) -> list[Role]:
    """One role per task, in rank order, as the launchers plan them (runner.plan.layout)."""
    return [slot.role for slot in task_layout(manifest)]


def batch_request(manifest: Manifest, run_id: str, comment: str, grace: float) -> BatchRequest:
    layout = task_layout(manifest)
    roles = [slot.role for slot in layout]
    nodes = min(manifest.node_count, len(roles))
    per_node = math.ceil(len(roles) / nodes)
    gpus = (
        per_node if any(slot.gpus for slot in layout) else 0
    )  # Slurm places tasks by block: any node may hold a GPU task
    limit = manifest.max_run_duration_seconds
    spec = manifest.compute.slurm
    # Slurm's limit comes after tftrain's own (which stops the job with its grace): a backstop; or
    # compute.slurm.time_limit, one job's share of a training that is requeued until it ends
    minutes = spec.time_limit_minutes or (math.ceil((limit + grace + 60) / 60) if limit else 0)
    placement = tuple(
        f"--{name}={value}"
        for name, value in (
            ("partition", spec.partition),
            ("account", spec.account),
            ("qos", spec.qos),
            ("constraint", spec.constraint),
        )
        if value
    )
    request = BatchRequest(
        job_name=f"tftrain-{run_id}",
        comment=comment,
        nodes=nodes,
        ntasks=len(roles),
        ntasks_per_node=per_node if len(roles) % nodes == 0 else 0,  # uneven: Slurm places them (block)
        cpus_per_task=1,
        gpus_per_node=gpus,
        time_minutes=minutes,
        signal_seconds=max(1, math.ceil(grace)),
        requeue=spec.time_limit is not None,
        placement=placement,
        extra_args=tuple(spec.extra_args),
    )
    return _heterogeneous(request, manifest) if spec.heterogeneous else request


def _heterogeneous(request: BatchRequest, manifest: Manifest) -> BatchRequest:
    """Component 0: the chief and parameter servers on one node of ps_partition, no GPUs; component 1:
    the workers (and evaluator) on the other node_count - 1 nodes (at least one), with their GPUs."""
    layout = task_layout(manifest)
    servers = [slot for slot in layout if slot.role in SERVER_ROLES]
    workers = [slot for slot in layout if slot.role not in SERVER_ROLES]
    spec = manifest.compute.slurm
    nodes = min(max(manifest.node_count - 1, 1), len(workers))
    per_node = math.ceil(len(workers) / nodes)

    def placed(partition: str | None) -> tuple[str, ...]:
        others = tuple(option for option in request.placement if not option.startswith("--partition="))
        return (f"--partition={partition}",) * bool(partition) + others

    first = replace(
        request,
        nodes=1,
        ntasks=len(servers),
        ntasks_per_node=len(servers),
        gpus_per_node=0,
        placement=placed(spec.ps_partition or spec.partition),
    )
    second = replace(
        request,
        nodes=nodes,
        ntasks=len(workers),
        ntasks_per_node=per_node if len(workers) % nodes == 0 else 0,
        gpus_per_node=per_node if any(slot.gpus for slot in workers) else 0,
        placement=placed(spec.partition),
    )
    return replace(request, nodes=1 + nodes, components=(first, second))


def slurm_components(manifest: Manifest) -> list[list[int]] | None:
    """The plan's ranks of each component of a heterogeneous job, in the order Slurm numbers its
    tasks (SLURM_PROCID, from 0 in each component's own step); None for a job of one component."""
    if not manifest.compute.slurm.heterogeneous:
        return None
    layout = task_layout(manifest)
    servers = [rank for rank, slot in enumerate(layout) if slot.role in SERVER_ROLES]
    return [servers, [rank for rank in range(len(layout)) if rank not in servers]]


def task_log(rank: int, components: list[list[int]] | None) -> str:
    """The file srun writes task `rank`'s output to, in the job's directory (`log_pattern`'s)."""
    if components is None:
        return f"rank-{rank}.log"
    component = next(index for index, ranks in enumerate(components) if rank in ranks)
    return f"rank-{component}.{components[component].index(rank)}.log"


def log_pattern(component: int | None) -> str:
    """srun's --output pattern for a step (%t: the task's number in it); each start of a requeued
    job appends to it."""
    return "rank-%t.log" if component is None else f"rank-{component}.%t.log"


def launch_for(plan: LaunchPlan, manifest: Manifest, job_dir: str, python: str, pmix: bool) -> Launch:
    """How the batch script starts the tasks: srun runs rank.py once per task (its output in
    rank-N.log), MPI ranks through srun's pmix where the cluster has it, else one mpirun."""
    rank = [python, RANK_PY, job_dir]
    out = f"--output={job_dir}/{log_pattern(None)}"
    if plan.driver is None and manifest.compute.slurm.heterogeneous:
        # a step per component (Slurm 22.05 numbers a step over several components' %t wrongly), the
        # two at once; rank.py JOB_DIR COMPONENT finds its task
        steps = [
            shlex.join(
                ["srun", f"--het-group={component}", "--kill-on-bad-exit=0", "--open-mode=append"]
                + [f"--output={job_dir}/{log_pattern(component)}", *rank, str(component)]
            )
            for component in (0, 1)
        ]
        return Launch(LaunchMode.SRUN, f"{{ {steps[0]} & {steps[1]}; wait; }}")
    if plan.driver is None:
        return Launch(LaunchMode.SRUN, shlex.join(["srun", "--kill-on-bad-exit=0", "--open-mode=append", out, *rank]))
    if pmix:
        return Launch(
            LaunchMode.SRUN_PMIX,
            shlex.join(["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--open-mode=append", out, *rank]),
        )
    training = manifest.distributed_training
    size = len(plan.tasks)
    argv = [
        "mpirun",
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        str(size),
        *OPEN_MPI_FLAGS,
        *training.mpi_args,
        *plan.tasks[0].argv,
    ]
    return Launch(LaunchMode.MPIRUN, shlex.join(argv))


def tasks_document(plan: LaunchPlan, job_dir: str, components: list[list[int]] | None = None) -> str:
    """tasks.json: each task's argv, cwd and own variables; no secret, no shared variable;
    `components`: a heterogeneous job's ranks per component (slurm_components)."""
    shared = shared_env(plan)
    cluster = json.loads(plan.tasks[0].env["TF_CONFIG"])["cluster"] if "TF_CONFIG" in plan.tasks[0].env else {}
    tasks = []
    for task in plan.tasks:
        own = {
            key: value
            for key, value in task.env.items()
            if key not in shared and key not in plan.secret_names and key not in ("TF_CONFIG", "TFTRAIN_RANK")
        }
        tasks.append(
            {"role": str(task.role), "index": task.index, "argv": list(task.argv), "cwd": task.cwd, "env": own}
        )
    document = {"dir": job_dir, "tf_config": bool(cluster), "cluster_roles": sorted(cluster), "tasks": tasks}
    if components is not None:
        document["components"] = components
    return json.dumps(document, indent=1) + "\n"


def shared_env(plan: LaunchPlan) -> dict[str, str]:
    """The variables every task has alike (secrets included): sbatch's environment, which Slurm exports."""
    first = plan.tasks[0].env
    return {
        key: value
        for key, value in first.items()
        if key not in TASK_KEYS and all(task.env.get(key) == value for task in plan.tasks)
    }


def batch_script(request: BatchRequest, launch: Launch, job_dir: str, workdir: str, run_id: str) -> str:
    return render(
        "slurm_batch.sh.j2",
        request=request,
        launch=launch,
        job_dir=job_dir,
        run_id=run_id,
        workdir=workdir,
        quote=shlex.quote,
    )
