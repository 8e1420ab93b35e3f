"""`tftrain run --target kubernetes`: the code image built and pushed to a real registry, the job
created through the kubernetes client against a server speaking the Kubernetes API."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

pytestmark = pytest.mark.integration


def test_a_job_on_the_cluster(cluster_manifest, cli, home, kube_api, registry):
    result = cli("run", "-f", str(cluster_manifest), timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    ((name, job),) = kube_api.jobs.items()
    run_dir = home / "runs" / "parameter-server-1"
    applied = yaml.safe_load((run_dir / "launch" / "kubernetes.yaml").read_text())
    assert job["spec"] == applied["spec"] and job["metadata"]["namespace"] == "training"
    image = job["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith(f"{registry}/team/tftrain/parameter-server:")
    catalog = json.loads(urllib.request.urlopen(f"http://{registry}/v2/_catalog").read())
    assert "team/tftrain/parameter-server" in catalog["repositories"]  # really pushed
    secret = kube_api.secrets["parameter-server-secrets"]
    assert secret["stringData"] == {"TFTRAIN_K8S_TOKEN": "k8s-secret-value"}
    assert "k8s-secret-value" not in json.dumps(job)
    logs = run_dir / "workdir" / "logs"
    assert "chief: coordinating 2 workers" in (logs / "0.log").read_text()
    assert "task ps:0 in cluster" in (logs / "3.log").read_text()
    points = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(p["name"], p["value"], p["step"]) for p in points] == [("loss", 0.5, 1), ("loss", 0.25, 2)]


def test_a_failed_job_says_what_the_operator_said(cluster_manifest, cli, home, kube_api):
    kube_api.result = ("Failed", "TFJob training/x has failed because 1 Worker replica(s) failed.")
    result = cli("run", "-f", str(cluster_manifest), timeout=1200)
    assert result.returncode == 10
    assert "has failed because 1 Worker replica(s) failed" in result.stderr


def test_a_cluster_that_refuses(cluster_manifest, cli, home, kube_api, tmp_path):
    config = tmp_path / "kubeconfig"
    config.write_text(config.read_text().replace("test-token", "wrong-token"))
    result = cli("run", "-f", str(cluster_manifest), timeout=1200)
    assert result.returncode == 14
    assert "Kubernetes: creating Secret training/parameter-server-secrets answered 401 Unauthorized" in result.stderr
    record = json.loads((home / "runs/parameter-server-1/run.json").read_text())
    assert record["status"] == "Failed" and record["phases"][-2]["phase"] == "PostProcessing"


def test_cancel_deletes_the_job(cluster_manifest, home, kube_api):
    import signal
    import subprocess
    import time

    from conftest import TFTRAIN

    kube_api.running_polls = 10**6  # never ends on its own
    process = subprocess.Popen(
        [TFTRAIN, "run", "-f", str(cluster_manifest)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 600
    while not kube_api.jobs and time.monotonic() < deadline:
        time.sleep(0.2)
    name = next(iter(kube_api.jobs))
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 12, err
    assert kube_api.deleted == [name]
