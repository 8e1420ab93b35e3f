"""Kubeflow resources rendered from plans: checked against the CRDs' schemas and golden files.
Set TFTRAIN_UPDATE_GOLDEN=1 to rewrite the golden files after an intended change."""

from __future__ import annotations

import json
import os
import re
import types
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import REPO

DATA = REPO / "tests" / "data"
GOLDEN = DATA / "golden"
IMAGE = re.compile(r"image: tftrain/[a-z0-9._-]+:[0-9a-f]{16}")


def schema(kind: str) -> dict:
    return json.loads((DATA / "kubeflow" / f"{kind.lower()}.schema.json").read_text())


def rendered(cli, path: Path) -> str:
    result = cli("plan", "-f", str(path), "--target", "kubernetes")
    assert result.returncode == 0, result.stderr
    return IMAGE.sub("image: tftrain/IMAGE", result.stdout)


def check_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("TFTRAIN_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize(
    ("example", "kind", "golden"),
    [
        ("parameter-server", "TFJob", "tfjob-parameter-server.yaml"),
        ("multi-worker", "TFJob", "tfjob-multi-worker.yaml"),
        ("horovod-keras", "MPIJob", "mpijob-horovod.yaml"),
    ],
)
def test_examples_render_valid_kubeflow_jobs(repo, cli, example, kind, golden):
    text = rendered(cli, repo / "examples" / example / "tftrain.yml")
    (document,) = list(yaml.safe_load_all(text))
    assert document["kind"] == kind
    jsonschema.validate(document, schema(kind))
    check_golden(golden, text)


def test_tfjob_details(repo, cli):
    document = yaml.safe_load(rendered(cli, repo / "examples" / "parameter-server" / "tftrain.yml"))
    replicas = document["spec"]["tfReplicaSpecs"]
    assert {kind: spec["replicas"] for kind, spec in replicas.items()} == {"Chief": 1, "Worker": 2, "PS": 1}
    container = replicas["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "tensorflow"
    assert not any(e["name"] == "TF_CONFIG" for e in container["env"])  # the operator writes it
    assert document["metadata"]["namespace"] == "default"


def test_gpus_shm_and_secrets(project, cli):
    path = project(
        manifest=(
            "use_gpu: true\nshm_size: 2g\nsecrets: [API_TOKEN]\nnode_count: 2\ndistributed_training:\n"
            "  backend: mpi\n  process_count_per_node: 2\ncompute:\n  slots_per_node: 4\n"
        )
    )
    text = rendered(cli, path)
    document = yaml.safe_load(text)
    jsonschema.validate(document, schema("MPIJob"))
    spec = document["spec"]
    assert spec["slotsPerWorker"] == 2 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert worker["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == ["mpirun"] and "-H" not in launcher["args"] and "-np" in launcher["args"]
    token = next(e for e in launcher["env"] if e["name"] == "API_TOKEN")
    assert token == {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "demo-secrets", "key": "API_TOKEN"}}}


def test_namespace_from_the_manifest(project, cli):
    document = yaml.safe_load(rendered(cli, project(manifest="compute:\n  kubernetes:\n    namespace: training\n")))
    assert document["metadata"]["namespace"] == "training"
    assert document["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1


def test_run_without_a_kubeconfig_says_what_to_do(project, cli, home, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    result = cli("run", "-f", str(project()), "--target", "kubernetes")
    assert result.returncode == 7
    assert "needs a kubeconfig" in result.stderr and "tftrain plan --target kubernetes --output-dir" in result.stderr
    assert not (home / "runs").exists()


def test_run_needs_a_way_to_ship_the_code(project, cli, home, monkeypatch, tmp_path):
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(config))
    result = cli("run", "-f", str(project()), "--target", "kubernetes")
    assert result.returncode == 7
    assert "compute.kubernetes: set registry" in result.stderr
    assert not (home / "runs").exists()


def test_the_code_image_changes_with_the_shipped_runner(tmp_path, monkeypatch):
    # an upgrade of tftrain (same version string, new runner files) must not reuse the old image
    import runner
    from runner.environments import training_image
    from runner.targets.base import Environment
    from runner.targets.containerized import ImageState
    from runner.targets.kubernetes import target as kubernetes_target
    from runner.targets.kubernetes.target import KubernetesTarget

    workdir, shipped = tmp_path / "workdir", tmp_path / "site" / "runner"
    workdir.mkdir()
    (workdir / "train.py").write_text("print('train')\n")
    shipped.mkdir(parents=True)
    (shipped / "__init__.py").write_text("")
    (shipped / "plan.py").write_text("OLD = 1\n")
    monkeypatch.setattr(runner, "__file__", str(shipped / "__init__.py"))
    training = Environment("python", "image", True, isolated=True, image="tftrain/digits:0123456789abcdef")
    monkeypatch.setattr(kubernetes_target, "image_environment", lambda *args: training)
    monkeypatch.setattr(training_image, "docker_client", lambda: None)
    monkeypatch.setattr(training_image, "existing_image", lambda client, tag: None)
    built = []
    monkeypatch.setattr(
        training_image, "build_code_image", lambda client, base, trees, tag, *rest: built.append((tag, trees))
    )
    monkeypatch.setattr(training_image, "push_image", lambda *args: None)
    kubernetes = types.SimpleNamespace(image=None, registry="registry.example:5000")
    manifest = types.SimpleNamespace(compute=types.SimpleNamespace(kubernetes=kubernetes), image_registry=None)
    loaded = types.SimpleNamespace(manifest=manifest)
    paths = types.SimpleNamespace(workdir=workdir, prepare_log=tmp_path / "prepare.log")

    def code_image() -> str:
        return KubernetesTarget().environment(loaded, ImageState("base"), paths, None, False).image

    first = code_image()
    assert code_image() == first
    (shipped / "__pycache__").mkdir()
    (shipped / "__pycache__" / "plan.cpython-312.pyc").write_bytes(b"compiled")
    assert code_image() == first  # not shipped (the build context leaves caches out)
    (shipped / "plan.py").write_text("NEW = 2\n")
    upgraded = code_image()
    assert upgraded != first and upgraded.startswith("registry.example:5000/tftrain/digits:0123456789ab-")
    (workdir / "train.py").write_text("print('changed')\n")
    assert code_image() not in (first, upgraded)
    assert built[0][1]["runner"] == shipped


def test_the_operators_deadline_is_a_backstop_after_ours(project):
    from runner.manifest import load_manifest
    from runner.targets.kubernetes.jobs import _run_policy

    manifest = load_manifest(
        project(manifest="max_run_duration_seconds: 600\ncompute:\n  kill_grace_seconds: 30\n")
    ).manifest
    assert _run_policy(manifest)["activeDeadlineSeconds"] > 600 + 30


class FakeJob:
    """A job whose operator answers Failed at the first look, as when its activeDeadlineSeconds fired."""

    def __init__(self, message: str) -> None:
        self.message, self.namespace, self.name, self.deleted = message, "training", "x", False

    def create(self) -> None:
        pass

    def status(self):
        return "Failed", self.message

    def pods(self):
        return []

    def delete(self) -> None:
        self.deleted = True


def run_against(monkeypatch, job: FakeJob, deadline_passed: bool):
    import time

    from runner.targets.base import RunControl

    offset = -1 if deadline_passed else 600
    return execute_job(
        monkeypatch, job, RunControl(marker="m", grace_seconds=1, limit_seconds=5, deadline=time.monotonic() + offset)
    )


def execute_job(monkeypatch, job: FakeJob, control):
    from runner.targets.kubernetes import target

    document = {"kind": "TFJob", "metadata": {"labels": {"tftrain/model": "m"}}}
    plan = types.SimpleNamespace(
        files={"kubernetes.yaml": yaml.safe_dump(document)},
        tasks=[types.SimpleNamespace(env={})],
        secret_names=frozenset(),
    )
    monkeypatch.setattr(target, "KubeJob", lambda config, document: job)
    monkeypatch.setattr(target, "POLL_SECONDS", 0.0)
    logger = types.SimpleNamespace(info=lambda *args, **kwargs: None)
    return target.KubernetesTarget().execute(plan, None, {}, control, logger)


def test_the_operators_deadline_still_ends_the_run_timed_out(monkeypatch):
    from runner.training.pipeline import EXIT_CODES

    operator = "TFJob training/x has failed because it was active longer than specified deadline"
    outcome = run_against(monkeypatch, FakeJob(operator), deadline_passed=True)
    assert outcome.status == "TimedOut" and EXIT_CODES[outcome.status] == 11
    assert outcome.message.startswith("max_run_duration_seconds (5s) reached")
    assert run_against(monkeypatch, FakeJob(operator), deadline_passed=False).status == "TimedOut"
    failed = run_against(
        monkeypatch, FakeJob("TFJob training/x has failed because 1 Worker replica(s) failed."), deadline_passed=False
    )
    assert failed.status == "Failed" and failed.exit_code == 1


class RunningJob(FakeJob):
    """A job that runs until it is deleted."""

    def status(self):
        return None, ""


def test_a_canceled_or_timed_out_job_is_deleted_by_the_one_clock(monkeypatch):
    job = RunningJob("")
    outcome = run_against(monkeypatch, job, deadline_passed=True)
    assert (outcome.status, outcome.message) == (
        "TimedOut",
        "max_run_duration_seconds (5s) reached; the job was deleted",
    )
    assert job.deleted
    from runner.targets.base import RunControl

    job = RunningJob("")
    control = RunControl(marker="m", grace_seconds=1)
    control.cancel.set()
    outcome = execute_job(monkeypatch, job, control)
    assert (outcome.status, outcome.message) == ("Canceled", "canceled by a signal to tftrain; the job was deleted")
    assert job.deleted
