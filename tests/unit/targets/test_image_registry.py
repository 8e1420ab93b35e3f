"""image_registry on each target without a daemon or cluster: the pull secret a job names, the
credentials docker gets, and the password kept out of the plan and every error line."""

from __future__ import annotations

import base64
import json
import types

import pytest
import yaml

from runner.environments.daemon import log_in, registry_auth
from runner.errors import DockerError, PreparingError
from runner.manifest import load_manifest
from runner.targets.kubernetes.pullsecret import SECRET_TYPE, docker_config, secret_for

PASSWORD = "s3cr3t-Pa55word"
PRIVATE = (
    "use_docker: true\ncustom_docker_image: registry.example.com:5000/team/tf:2.18\nsecrets: [REGISTRY_PASSWORD]\n"
    "image_registry: {address: 'registry.example.com:5000', username: ci, password_secret: REGISTRY_PASSWORD}\n"
)


def test_the_kubernetes_job_pulls_through_a_pull_secret_and_never_holds_the_password(project, cli, monkeypatch):
    monkeypatch.setenv("REGISTRY_PASSWORD", PASSWORD)
    result = cli("plan", "-f", str(project(manifest=PRIVATE)), "--target", "kubernetes")
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    document = yaml.safe_load(result.stdout)
    pod = document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "demo-registry"}]
    name, data = secret_for(document, {"REGISTRY_PASSWORD": PASSWORD})
    assert name == "demo-registry" and SECRET_TYPE == "kubernetes.io/dockerconfigjson"
    auth = json.loads(data[".dockerconfigjson"])["auths"]["registry.example.com:5000"]
    assert base64.b64decode(auth["auth"]).decode() == f"ci:{PASSWORD}"


def test_a_public_job_has_no_pull_secret(project, cli):
    result = cli("plan", "-f", str(project()), "--target", "kubernetes")
    document = yaml.safe_load(result.stdout)
    assert "imagePullSecrets" not in document["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert secret_for(document, {}) is None


def test_the_docker_config_is_what_docker_login_writes():
    config = json.loads(docker_config("r:5000", "u", "p")[".dockerconfigjson"])
    assert config == {"auths": {"r:5000": {"username": "u", "password": "p", "auth": "dTpw"}}}


def test_the_password_must_be_set(project, monkeypatch):
    monkeypatch.delenv("REGISTRY_PASSWORD", raising=False)
    manifest = load_manifest(project(manifest=PRIVATE)).manifest
    with pytest.raises(PreparingError, match="image_registry.password_secret: REGISTRY_PASSWORD is not set"):
        registry_auth(manifest)
    monkeypatch.setenv("REGISTRY_PASSWORD", PASSWORD)
    assert registry_auth(manifest) == {
        "username": "ci",
        "password": PASSWORD,
        "serveraddress": "registry.example.com:5000",
    }


class RefusingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def login(self, *args, **kwargs):
        raise self.error


@pytest.mark.parametrize(
    "error, said",
    [
        ("unauthorized", "the registry refused the username or password"),
        ("down", 'Get "https://registry.example.com:5000/v2/": dial tcp: connection refused'),
    ],
)
def test_a_refused_login_is_one_line_without_the_password(project, monkeypatch, error, said):
    import docker
    from requests import Response

    response = Response()
    response.status_code = 401 if error == "unauthorized" else 500
    explanation = (
        'Get "https://registry.example.com:5000/v2/": unauthorized: authentication required'
        if error == "unauthorized"
        else 'Get "https://registry.example.com:5000/v2/": dial tcp: connection refused'
    )
    monkeypatch.setenv("REGISTRY_PASSWORD", PASSWORD)
    manifest = load_manifest(project(manifest=PRIVATE)).manifest
    client = RefusingClient(docker.errors.APIError("login", response, explanation))
    with pytest.raises(DockerError) as info:
        log_in(client, manifest.image_registry, registry_auth(manifest))
    message = str(info.value)
    assert message.startswith("image_registry: logging in to registry.example.com:5000 as ci failed: ")
    assert said in message and PASSWORD not in message and "\n" not in message


def test_user_managed_plans_the_image_as_it_is(project, cli):
    result = cli(
        "plan", "-f", str(project(manifest="use_docker: true\ncustom_docker_image: team/tf:1\nuser_managed: true\n"))
    )
    assert result.returncode == 0, result.stderr
    assert "image team/tf:1 as it is (user_managed, python3)" in result.stdout + result.stderr
    assert "Dockerfile" not in result.stdout


class FakeDaemon:
    """A pool host's daemon: records the login and the pull, answers the import check."""

    def __init__(self) -> None:
        import docker

        self.calls: list[tuple] = []
        outer = self

        class Images:
            def get(self, name):
                raise docker.errors.ImageNotFound(name)

            def pull(self, name, auth_config=None):
                outer.calls.append(("pull", name, auth_config["username"] if auth_config else None))
                return types.SimpleNamespace(id="sha256:feed")

        class Containers:
            def run(self, image, argv, **kwargs):
                outer.calls.append(("run", image, argv[0], kwargs.get("network_mode")))
                return b"2.18.1\n"

        self.images, self.containers = Images(), Containers()

    def login(self, username, password, registry, reauth):
        self.calls.append(("login", username, registry))


def test_every_pool_host_logs_in_pulls_and_checks_a_user_managed_image(project, monkeypatch):
    from runner.targets.pool.target import PoolTarget

    monkeypatch.setenv("REGISTRY_PASSWORD", PASSWORD)
    loaded = load_manifest(project(manifest=PRIVATE + "user_managed: true\n"))
    daemons = {"gpu-1": FakeDaemon(), "gpu-2": FakeDaemon()}
    session = types.SimpleNamespace(
        hosts=lambda: [types.SimpleNamespace(name=name) for name in daemons],
        client=daemons.get,
        job=types.SimpleNamespace(base_image=loaded.manifest.custom_docker_image),
        hostmap="placed",
    )
    logger = types.SimpleNamespace(info=lambda text: None)
    env = PoolTarget().environment(loaded, session, None, logger, dry_run=False)
    image = loaded.manifest.custom_docker_image
    for daemon in daemons.values():
        assert daemon.calls == [
            ("login", "ci", "registry.example.com:5000"), ("pull", image, "ci"), ("run", image, "python3", "none"),
        ]  # fmt: skip
    assert (env.image, env.python, env.placement) == (image, "python3", "placed")
    assert env.description == f"image {image} as it is (user_managed, python3, TensorFlow 2.18.1)"
