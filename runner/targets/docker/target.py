"""The docker target: the plan's tasks run in containers from the content-tagged training image.

The snapshot is mounted read-only at /workspace, outputs/ and logs/ read-write over it, so
files come back to the run directory; containers run as the invoking user and are removed in
every outcome.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from runner.environments import docker_client
from runner.errors import Vanished
from runner.history.rundir import RunPaths, RuntimePaths
from runner.history.states import RunStatus
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan, TaskSpec
from runner.shared.machine import named_gpus
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, follow
from runner.targets.container import LABEL_RUN, Container, remove_run_containers, stop_all
from runner.targets.containerized import ImageState, container_view, image_environment, image_state, probe_in_container
from runner.targets.supervise import by_policy, supervise
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump


class DockerTarget(Target):
    name = "docker"

    def reap_lost(self, run_id: str, home: Path) -> str | None:
        removed = remove_run_containers(run_id)
        return f"removed {removed} container{'s' if removed > 1 else ''} it left running" if removed else None

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> ImageState:
        return image_state(loaded)

    def environment(
        self, loaded: LoadedManifest, state: ImageState, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        return image_environment(loaded, state.base_image, paths, logger, dry_run, self.machine.ca_bundles)

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec]:
        return container_view(loaded, env, paths, inputs, resume)

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        client = docker_client()
        run_id = plan.tasks[0].env["TFTRAIN_RUN_ID"]
        # the GPUs tftrain may use (its CUDA_VISIBLE_DEVICES, a sweep trial's share) by id; else all of them
        gpu_ids = (named_gpus(self.gpus) or ()) if plan.container.gpus else ()
        with ExitStack() as stack:
            started: list[tuple[TaskSpec, Container]] = []
            for task in plan.processes:
                env = {"HOME": "/tmp", **task.env}  # the invoking user has no home in the image
                label = "launcher" if task is plan.driver else str(task.rank)
                container = stack.enter_context(
                    Container(
                        client,
                        plan.container,
                        task.argv,
                        env,
                        task.cwd,
                        f"tftrain-{run_id}-{label}",
                        {LABEL_RUN: run_id},
                        gpu_ids=gpu_ids,
                    )
                )
                read_fd, write_fd = os.pipe()
                follow(pump, read_fd, plan, task, sinks)
                container.start(write_fd)
                started.append((task, container))
            outcome = _wait(started, plan.success_policy, control, plan.container)
        pump.join()
        return outcome

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        yield lambda args, log, timeout: probe_in_container(env, paths, args, log, timeout)


def _wait(started: list[tuple[TaskSpec, Container]], policy: str, control: RunControl, spec: ContainerSpec) -> Outcome:
    containers = [container for _, container in started]

    def poll() -> list[tuple[TaskSpec, int | None]]:
        return [(task, container.poll()) for task, container in started]

    def stop(grace: float) -> None:
        stop_all(containers, grace, control.force)

    outcome = supervise(by_policy(poll, stop, policy, control), stop, control)
    if outcome.status == RunStatus.FAILED and any(_out_of_memory(c) for c in containers):
        memory = spec.memory or "none"
        return Outcome(
            RunStatus.FAILED, outcome.exit_code, f"killed: out of memory (compute.memory_limit: {memory})", outcome.rank
        )
    return outcome


def _out_of_memory(container: Container) -> bool:
    try:
        return bool(container.state().get("OOMKilled"))
    except Vanished:
        return False
