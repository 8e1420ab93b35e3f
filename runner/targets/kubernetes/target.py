"""The kubernetes target: the plan as a Kubeflow training-operator job (TFJob or MPIJob) on the
cluster of a kubeconfig. Nothing can be mounted from this machine there, so the code travels in
an image: `compute.kubernetes.image` (yours), or one tftrain builds FROM the training image and
pushes to `compute.kubernetes.registry`. Pod logs stream into the run like local ranks' logs.
Outputs stay in the pods: write what must be kept to a volume or object storage."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import yaml

from runner.environments import push_code_image
from runner.errors import UnsupportedError
from runner.history.rundir import RunPaths, RuntimePaths
from runner.history.states import RunStatus
from runner.manifest import LoadedManifest
from runner.plan.model import ContainerSpec, LaunchPlan, NetworkMode
from runner.targets.base import Environment, Outcome, Probe, RunControl, Target, follow
from runner.targets.containerized import ImageState, container_view, image_environment, image_state, probe_in_container
from runner.targets.kubernetes import jobs
from runner.targets.kubernetes.client import KubeJob
from runner.targets.kubernetes.pullsecret import SECRET_TYPE, secret_for
from runner.targets.supervise import supervise
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump

POLL_SECONDS = 1.0
LOG_DRAIN_SECONDS = 30.0


def kubeconfig(named: str | None) -> Path | None:
    """`named` ($KUBECONFIG's first file, from the settings) where it is a file, else ~/.kube/config."""
    for candidate in (named, str(Path.home() / ".kube" / "config")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


class KubernetesTarget(Target):
    """The training image as the docker target builds it (on this machine's daemon), with the code
    baked into an image the cluster can pull, run as the operator's job."""

    name = "kubernetes"

    def check(self, loaded: LoadedManifest, dry_run: bool = False) -> ImageState:
        base = image_state(loaded)
        if dry_run:
            return base
        if kubeconfig(self.machine.kubeconfig) is None:
            raise UnsupportedError(
                "compute.target: kubernetes needs a kubeconfig ($KUBECONFIG or ~/.kube/config) and none was found; "
                "`tftrain plan --target kubernetes --output-dir DIR` writes the TFJob/MPIJob to apply yourself"
            )
        spec = loaded.manifest.compute.kubernetes
        if not spec.image and not spec.registry:
            raise UnsupportedError(
                "compute.kubernetes: set registry (tftrain pushes the code image there) or image (one you built "
                "FROM the training image, with the code at /workspace): the cluster cannot see this machine's files"
            )
        return base

    def environment(
        self, loaded: LoadedManifest, state: ImageState, paths: RunPaths, logger: Logger, dry_run: bool
    ) -> Environment:
        spec = loaded.manifest.compute.kubernetes
        if spec.image:
            return Environment(
                "python", f"image {spec.image} (compute.kubernetes.image)", True, isolated=True, image=spec.image
            )
        training = image_environment(loaded, state.base_image, paths, logger, dry_run, self.machine.ca_bundles)
        if dry_run:
            image = f"{spec.registry or '<registry>'}/{training.image}-code"
            return replace(training, image=image, description=f"{training.description}, code image {image}")
        tag = push_code_image(loaded, training.image, spec.registry, paths, logger)
        return replace(training, image=tag, description=f"{training.description}, code image {tag} (pushed)")

    def runtime(
        self, loaded: LoadedManifest, env: Environment, paths: RunPaths, inputs: dict[str, Path], resume: Path | None
    ) -> tuple[RuntimePaths, ContainerSpec]:
        view, container = container_view(loaded, env, paths, {}, resume)
        inside_inputs = {input_name: f"/tftrain/inputs/{input_name}" for input_name in inputs}
        view = view._replace(inputs=inside_inputs)
        # the pod's command is the task's argv as it is (kubectl logs keeps the two streams apart)
        return view, container._replace(mounts=(), network_mode=NetworkMode.POD, one_stream=False)

    def finalize(self, plan: LaunchPlan, loaded: LoadedManifest, run_id: str) -> LaunchPlan:
        """The job document, kept with the run (launch/kubernetes.yaml) and applied as it is."""
        documents = jobs.render(plan, loaded.manifest, run_id, loaded.manifest.compute.kubernetes.namespace)
        return replace(plan, files={**plan.files, "kubernetes.yaml": jobs.to_yaml(documents)})

    def execute(
        self, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], control: RunControl, logger: Logger
    ) -> Outcome:
        (document,) = yaml.safe_load_all(plan.files["kubernetes.yaml"])
        job = KubeJob(kubeconfig(self.machine.kubeconfig), document)
        secrets = {key: value for key, value in plan.tasks[0].env.items() if key in plan.secret_names}
        if secrets:
            job.apply_secret(jobs.secret_name(document["metadata"]["labels"]["tftrain/model"]), secrets)
        pull = secret_for(document, plan.tasks[0].env)
        if pull is not None:
            job.apply_secret(*pull, secret_type=SECRET_TYPE)
        job.create()
        logger.info(f"created {document['kind']} {job.namespace}/{job.name}")
        streams: dict[str, object] = {}

        def judge() -> Outcome | None:
            _follow_new_pods(job, plan, pump, sinks, streams)
            state, message = job.status()
            if state is None:
                return None
            _follow_new_pods(job, plan, pump, sinks, streams)
            _drain(streams)
            if state == "Succeeded":
                return Outcome(RunStatus.COMPLETED, 0, None)
            if _past_deadline(control, message):  # the operator's backstop fired before our own clock was read
                return Outcome(
                    RunStatus.TIMED_OUT, None, f"max_run_duration_seconds ({control.limit_seconds}s) reached; {message}"
                )
            return Outcome(RunStatus.FAILED, 1, message or "the job failed")

        def stop(grace: float) -> None:
            # the operator ends the pods (with their own grace) when the job is gone
            job.delete()
            _drain(streams)

        return supervise(judge, stop, control, every=POLL_SECONDS, stopped="; the job was deleted")

    @contextmanager
    def probing(self, env: Environment, paths: RunPaths, warm: bool) -> Iterator[Probe]:
        """The gate in a container of the code image, which this machine's daemon built."""
        yield lambda args, log, timeout: probe_in_container(env, paths, args, log, timeout)


def _past_deadline(control: RunControl, message: str) -> bool:
    """The job failed because its time was up: our deadline has passed, or the operator says its
    activeDeadlineSeconds was ("… was active longer than specified deadline")."""
    if control.limit_seconds is None:
        return False
    return (
        control.deadline is not None and time.monotonic() >= control.deadline
    ) or "longer than specified deadline" in message


def _follow_new_pods(job: KubeJob, plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink], streams: dict) -> None:
    for pod in job.pods():
        if pod.name in streams or pod.phase not in ("Running", "Succeeded", "Failed"):
            continue
        read_fd, write_fd = os.pipe()
        if pod.replica_type == "launcher":
            task = plan.driver
        else:
            task = next((t for t in plan.tasks if _replica(t.role) == pod.replica_type and t.index == pod.index), None)
        if task is None:  # an MPI worker (sshd): kept, not parsed
            pump.add(f"{pod.replica_type}-{pod.index}", read_fd, None, f"{pod.replica_type} {pod.index}")
        else:
            follow(pump, read_fd, plan, task, sinks)
        streams[pod.name] = job.stream_logs(pod, write_fd)


def _replica(role: str) -> str:
    """The operator's replica-type label for a task role (a single process is a Worker)."""
    return jobs.REPLICA_TYPES[role].lower()


def _drain(streams: dict) -> None:
    deadline = time.monotonic() + LOG_DRAIN_SECONDS
    for thread in streams.values():
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
