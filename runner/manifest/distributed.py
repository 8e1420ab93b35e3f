"""The `distributed_training:` section: MPI (Horovod), parameter servers, MultiWorkerMirroredStrategy, each
told apart by its `backend`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from runner.manifest.fields import MAX_PER_NODE, MAX_TASKS, Model, empty_list


class MpiTraining(Model):
    backend: Literal["mpi"]
    process_count_per_node: int = Field(default=1, ge=1, le=MAX_PER_NODE)
    launcher: Literal["mpirun", "horovodrun"] = Field(default="mpirun", description="How the ranks are started")
    hostfile: bool = Field(default=False, description="Pass the hosts as a hostfile (`host slots=K`) instead of -H")
    ssh_port: int | None = Field(default=None, ge=1, le=65535, description="ssh port of the hosts (-mca plm_rsh_args)")
    network_interface: str | None = Field(
        default=None, description="Network interface(s) for MPI and NCCL (btl_tcp_if_include, NCCL_SOCKET_IFNAME)"
    )
    mpi_args: list[str] = Field(default_factory=empty_list, description="Extra mpirun arguments")


class ParameterServerTraining(Model):
    backend: Literal["parameter_server"]
    worker_count: int = Field(default=1, ge=1, le=MAX_TASKS)
    parameter_server_count: int = Field(default=1, ge=1, le=MAX_TASKS)
    chief: bool = Field(default=True, description="Run a chief (the coordinator of TF2's ParameterServerStrategy)")
    evaluator: bool = Field(default=False, description="Run an evaluator task")
    evaluator_in_cluster: bool = Field(default=False, description="List the evaluator in TF_CONFIG's cluster")
    success_policy: Literal["chief", "all_workers"] = Field(
        default="chief", description="The job succeeds when the chief (else worker 0) ends, or when all workers end"
    )
    base_port: int | None = Field(
        default=None, ge=1024, le=65000, description="Ports base_port, base_port+1, …; default: free ports"
    )


class MultiWorkerMirroredTraining(Model):
    backend: Literal["multi_worker_mirrored"]
    worker_count: int = Field(default=1, ge=1, le=MAX_TASKS)
    base_port: int | None = Field(
        default=None, ge=1024, le=65000, description="Ports base_port, base_port+1, …; default: free ports"
    )
