"""A cluster or a registry that answers with an error: one `tftrain: error:` line naming the call
and the answer, never a traceback. Kubernetes is the server speaking its API (kube_api.py), told
to fail chosen requests; the push goes to the real Docker daemon."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

JOBS = "/apis/kubeflow.org/v1/namespaces/training/tfjobs"
CLUSTER = "compute:\n  target: kubernetes\n  kubernetes:\n    namespace: training\n    image: registry.example/demo:1\n"


def one_error_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error:")]
    return line[len("tftrain: error: ") :]


@pytest.fixture
def on_cluster(project, kube_api, tmp_path, monkeypatch):
    """A manifest for the cluster with an image of its own: nothing to build or push."""
    config = tmp_path / "kubeconfig"
    config.write_text(kube_api.kubeconfig())
    monkeypatch.setenv("KUBECONFIG", str(config))
    return project(manifest=CLUSTER + "secrets: [TFTRAIN_K8S_TOKEN]\n")


@pytest.mark.parametrize(
    ("method", "path", "status", "said"),
    [
        ("POST", JOBS, 500, "Kubernetes: creating TFJob training/demo-demo-1 answered 500 Internal Server Error"),
        (
            "POST",
            "/api/v1/namespaces/training/secrets",
            403,
            "Kubernetes: creating Secret training/demo-secrets answered 403 Forbidden",
        ),
        ("GET", JOBS + "/*", 503, "Kubernetes: reading TFJob training/demo-demo-1 answered 503 Service Unavailable"),
        (
            "GET",
            JOBS + "/*",
            0,
            (
                "Kubernetes: reading TFJob training/demo-demo-1 got no answer: Remote end closed connection without"
                " response"
            ),
        ),
    ],
)
def test_a_cluster_that_fails_a_call(on_cluster, cli, home, kube_api, monkeypatch, method, path, status, said):
    monkeypatch.setenv("TFTRAIN_K8S_TOKEN", "k8s-secret-value")
    kube_api.fail(method, path, status)
    result = cli("run", "-f", str(on_cluster), timeout=300)
    assert result.returncode == 14, result.stdout[-2000:] + result.stderr
    assert said in one_error_line(result)
    assert "k8s-secret-value" not in result.stdout + result.stderr
    record = json.loads((home / "runs/demo-1/run.json").read_text())
    assert record["status"] == "Failed"


def test_an_unreachable_cluster(project, cli, home, tmp_path, monkeypatch):
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],  # nothing listens there
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(config))
    result = cli("run", "-f", str(project(manifest=CLUSTER)), timeout=300)
    assert result.returncode == 14
    assert "Kubernetes: creating TFJob training/demo-demo-1 got no answer: Connection refused" in one_error_line(result)


def test_a_push_the_daemon_refuses(docker_client, tmp_path):
    from runner.environments.image_build import push_image
    from runner.errors import DockerError
    from runner.telemetry.logger import Logger

    tag = "127.0.0.1:9/Team/demo:1"  # the daemon refuses upper case before reaching any registry
    with pytest.raises(DockerError) as refused:
        push_image(docker_client, tag, Logger())
    assert (
        str(refused.value)
        == f"Docker: pushing {tag} answered 500 Internal Server Error: invalid reference format: repository name must"
        " be lowercase"
    )
