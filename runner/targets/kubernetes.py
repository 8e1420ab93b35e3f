"""The kubernetes target: the plan rendered as Kubeflow training-operator resources (TFJob or
MPIJob). `tftrain plan --target kubernetes` prints them; applying them to a cluster from
tftrain is not available yet, and says so before anything is recorded."""

from __future__ import annotations

import os
from pathlib import Path

from runner.errors import UnsupportedError
from runner.logger import Logger
from runner.logpump import LineSink, LogPump
from runner.manifest import LoadedManifest
from runner.plan import ContainerSpec, LaunchPlan
from runner.rundir import RunPaths, RuntimePaths
from runner.targets import Environment, Outcome, RunControl
from runner.targets import docker

name = "kubernetes"


def kubeconfig() -> Path | None:
    for candidate in (os.environ.get("KUBECONFIG"), str(Path.home() / ".kube" / "config")):
        if candidate and Path(candidate.split(os.pathsep)[0]).is_file():
            return Path(candidate.split(os.pathsep)[0])
    return None


def check(loaded: LoadedManifest, dry_run: bool = False) -> str:
    base = docker.check(loaded)
    if dry_run:
        return base
    config = kubeconfig()
    if config is None:
        raise UnsupportedError(
            "compute.target: kubernetes needs a kubeconfig ($KUBECONFIG or ~/.kube/config) and none was found; "
            "`tftrain plan --target kubernetes --output-dir DIR` writes the TFJob/MPIJob to apply yourself"
        )
    raise UnsupportedError(
        f"compute.target: kubernetes: applying jobs to the cluster in {config} is not available in this version "
        "of tftrain; `tftrain plan --target kubernetes --output-dir DIR` writes the TFJob/MPIJob for kubectl apply"
    )


def environment(loaded: LoadedManifest, base: str, paths: RunPaths, logger: Logger, dry_run: bool) -> Environment:
    return docker.environment(loaded, base, paths, logger, dry_run=True)


def runtime(loaded, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None) -> tuple[RuntimePaths, ContainerSpec]:
    view, container = docker.runtime(loaded, env, paths, {}, resume)
    inputs_inside = {name_: f"/tftrain/inputs/{name_}" for name_ in inputs}
    view = RuntimePaths(view.workdir, view.outputs, view.logs, view.metrics_dir, view.pythonpath, inputs_inside, view.resume, "/tftrain/launch")
    return view, ContainerSpec(container.image, (), container.user, "pod", container.shm_size, container.memory, container.gpus)


def execute(plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger) -> Outcome:
    raise UnsupportedError("compute.target: kubernetes runs are not available in this version of tftrain")
