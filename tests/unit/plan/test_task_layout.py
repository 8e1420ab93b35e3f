"""One task layout: what the launchers plan, what the pool asks hosts for and what Slurm allocates
are the same tasks with the same GPUs, for every backend."""

from __future__ import annotations

import pytest
from builders import RUNTIME

from runner.manifest import load_manifest
from runner.plan.launchers import build_plan
from runner.plan.layout import task_layout
from runner.plan.model import PlanContext, Role
from runner.targets.pool.jobs import request_for
from runner.targets.slurm.script import batch_request, roles_of

BACKENDS = {
    "single": "",
    "mpi": "node_count: 2\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 2\n",
    "multi_worker_mirrored": "distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 3\n",
    "parameter_server": (
        "distributed_training:\n  backend: parameter_server\n  worker_count: 2\n  parameter_server_count: 2\n "
        " evaluator: true\n"
    ),
    "parameter_server_no_chief": (
        "distributed_training:\n  backend: parameter_server\n  worker_count: 1\n  chief: false\n"
    ),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("gpu", [False, True])
def test_plan_pool_and_slurm_see_the_same_tasks_and_gpus(project, backend, gpu):
    manifest = load_manifest(
        project(manifest=f"use_gpu: {str(gpu).lower()}\ncompute:\n  slots_per_node: 8\n" + BACKENDS[backend])
    ).manifest
    layout = task_layout(manifest)
    plan = build_plan(PlanContext(manifest, "local", "/venv/bin/python", RUNTIME, {"TFTRAIN_RUN_ID": "r-1"}, ()))
    planned = [(task.role, task.index) for task in plan.tasks]  # the MPI launcher's driver is no task of the layout
    assert planned == [(slot.role, slot.index) for slot in layout]
    assert roles_of(manifest) == [slot.role for slot in layout]
    demands = request_for(manifest).demands
    assert sum(d.gpus for d in demands) == sum(slot.gpus for slot in layout)
    assert sum(d.gpus + d.cpus for d in demands) == len(layout)  # every task asks for one slot, of one kind
    gres = batch_request(manifest, "r-1", "tftrain:x", 30).gpus_per_node
    assert (gres > 0) == any(slot.gpus for slot in layout)


def test_a_chief_parameter_servers_and_an_evaluator_need_no_gpu_anywhere(project):
    manifest = load_manifest(project(manifest="use_gpu: true\n" + BACKENDS["parameter_server"])).manifest
    gpus = {slot.key: slot.gpus for slot in task_layout(manifest)}
    assert gpus == {"chief 0": 0, "worker 0": 1, "worker 1": 1, "ps 0": 0, "ps 1": 0, "evaluator 0": 0}
    assert {
        d.key: d.gpus for d in request_for(manifest).demands
    } == gpus  # the pool used to ask a GPU for the chief and evaluator


def test_mpi_ranks_of_a_node_are_placed_together(project):
    manifest = load_manifest(project(manifest="use_gpu: true\n" + BACKENDS["mpi"])).manifest
    assert [(s.role, s.index, s.node, s.key) for s in task_layout(manifest)] == [
        (Role.RANK, 0, 0, "node 0"),
        (Role.RANK, 1, 0, "node 0"),
        (Role.RANK, 2, 1, "node 1"),
        (Role.RANK, 3, 1, "node 1"),
    ]
    assert [(d.key, d.gpus) for d in request_for(manifest).demands] == [("node 0", 2), ("node 1", 2)]
