"""The job's tasks as every backend must see them: which role, which index, how many GPUs, on
which node slot — computed once from the manifest. The launchers plan these tasks, the pool asks
hosts for them and Slurm sizes its allocation by them (tests/unit/plan/test_task_layout.py holds the
three to one answer for every backend).

A GPU goes to the processes that compute gradients: the single process, each MPI rank, each worker.
A chief, a parameter server and an evaluator coordinate, hold variables or evaluate: no GPU of
their own (TensorFlow's parameter-server tutorial runs them on CPU hosts).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.manifest.model import Manifest, MpiTraining, MultiWorkerMirroredTraining, ParameterServerTraining
from runner.plan.model import Role

GPU_ROLES = frozenset({Role.MAIN, Role.RANK, Role.WORKER})


@dataclass(frozen=True)
class TaskSlot:
    role: Role
    index: int  # within its role: TF_CONFIG's task index, an MPI rank
    gpus: int  # GPUs this task needs (0 without use_gpu)
    node: int  # the node (MPI) or the task's own slot (every other backend: one task per slot)

    @property
    def key(self) -> str:
        """How a placement names the slot: "worker 1", "ps 0", "node 2" (an MPI node's ranks share one)."""
        return f"node {self.node}" if self.role is Role.RANK else f"{self.role} {self.index}"


def task_layout(manifest: Manifest) -> list[TaskSlot]:
    """Every task of the job, in rank order."""
    training = manifest.distributed_training
    gpu = 1 if manifest.use_gpu else 0
    if isinstance(training, MpiTraining):
        per_node = training.process_count_per_node
        return [_slot(Role.RANK, rank, gpu, rank // per_node) for rank in range(manifest.node_count * per_node)]
    if isinstance(training, MultiWorkerMirroredTraining):
        roles = [(Role.WORKER, i) for i in range(training.worker_count)]
    elif isinstance(training, ParameterServerTraining):
        roles = [(Role.CHIEF, 0)] if training.chief else []
        roles += [(Role.WORKER, i) for i in range(training.worker_count)]
        roles += [(Role.PS, i) for i in range(training.parameter_server_count)]
        roles += [(Role.EVALUATOR, 0)] if training.evaluator else []
    else:
        roles = [(Role.MAIN, 0)]
    return [_slot(role, index, gpu, slot) for slot, (role, index) in enumerate(roles)]


def _slot(role: Role, index: int, gpu: int, node: int) -> TaskSlot:
    return TaskSlot(role, index, gpu if role in GPU_ROLES else 0, node)
