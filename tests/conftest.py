"""Shared fixtures: a fresh TFTRAIN_HOME per test, manifests written on the fly, the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import docker_images
import purity
import pytest

pure = purity.pure  # the fixture every unit test gets (pytest_collection_modifyitems)

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
UNIT = REPO / "tests" / "unit"


# The fixtures that reach the Docker daemon (item.fixturenames holds what a test asks for, all the way down).
DOCKER_FIXTURES = {"docker_client", "registry"}
NO_DOCKER = "unix:///no-docker/the-test-asks-for-no-docker-fixture.sock"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups, and -m, which reads the marks
def pytest_collection_modifyitems(items):
    """tests/integration is the integration suite; tests/unit is held pure (tests/purity.py).

    scripts/test runs the suite in two pytest-xdist workers (`--dist loadgroup`); each group below
    runs whole, in order, on one of them: the tests that hold the Slurm cluster ("slurm": one job
    at a time on its two nodes), the tests that use Docker ("docker": one worker owns the daemon and
    cleans it, tests/docker_images.py), and every other module on its own (its module-scoped
    fixtures built once). A test that asks for no Docker fixture gets no Docker (DOCKER_HOST points
    nowhere): one that reached the daemon anyway would race the cleaning, so it fails instead."""
    for item in items:
        if UNIT in item.path.parents and not item.get_closest_marker("integration"):
            item.fixturenames.insert(0, "pure")
            item.add_marker(pytest.mark.xdist_group(item.path.stem))  # test files have unique names
        elif REPO / "tests" / "integration" in item.path.parents:
            item.add_marker(pytest.mark.integration)
            if "slurm_cluster" in item.fixturenames:
                item.add_marker(pytest.mark.slurm)
                item.add_marker(pytest.mark.xdist_group("slurm"))
                item.fixturenames.insert(0, "no_docker")
            elif DOCKER_FIXTURES & set(item.fixturenames) or item.get_closest_marker("docker"):
                item.add_marker(pytest.mark.docker)
                item.add_marker(pytest.mark.xdist_group("docker"))
                item.fixturenames.insert(0, "leaves_no_images")
            else:
                item.add_marker(pytest.mark.xdist_group(item.path.stem))  # test files have unique names
                item.fixturenames.insert(0, "no_docker")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the two long groups first, one on each worker (--no-loadscope-reorder)
        items.sort(key=lambda item: (not item.get_closest_marker("docker"), not item.get_closest_marker("slurm")))


def pytest_xdist_node_collection_finished(node, ids):
    """pytest-xdist groups by a suffix it writes into each test's id ("…::test@docker"), which pytest
    9.2 no longer keeps: its tests would then be spread one by one, the Docker tests racing each
    other's cleaning. Every test here has a group, so none having one is that."""
    if node.config.getoption("dist") == "loadgroup" and ids and not any("@" in nodeid for nodeid in ids):
        pytest.exit(
            "pytest-xdist did not group the tests: --dist loadgroup needs pytest < 9.2 until"
            " pytest-dev/pytest-xdist#1386 is fixed (scripts/requirements.txt pins it)",
            returncode=4,
        )


@pytest.fixture
def no_docker(monkeypatch):
    """The test and what it starts find no Docker daemon (tests/conftest.py's pytest_collection_modifyitems)."""
    monkeypatch.setenv("DOCKER_HOST", NO_DOCKER)


@pytest.fixture(scope="session")
def images_client():
    """Only where scripts/test runs the suite (TFTRAIN_TEST_REMOVE_IMAGES=1) does the suite clean
    Docker: it owns the daemon then, while a second pytest beside another would remove the other's
    images in the middle of its builds. Yields the client and what was there before the session."""
    client = docker_images.client_or_none() if os.environ.get("TFTRAIN_TEST_REMOVE_IMAGES") == "1" else None
    before = docker_images.ids(client)
    yield client, before
    docker_images.remove_images(client, before)


@pytest.fixture(scope="module")
def leaves_no_images(images_client):
    """A module's containers are removed after it; the images it built stay for the next modules
    while the disk has room, and go at the end of the session (tests/docker_images.py)."""
    client, session_before = images_client
    before = docker_images.ids(client)
    yield
    docker_images.remove_containers(client, before)
    docker_images.make_room(client, session_before)


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory) -> Path:
    """One virtualenv cache for the run: the example's environment is built once. pytest-xdist's
    workers share one (beside their own base directories; TFTRAIN_TEST_ENV_CACHE names another): an
    environment is built under a lock, so a second worker waits for the first's build."""
    shared = os.environ.get("TFTRAIN_TEST_ENV_CACHE")
    if shared:
        return Path(shared)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "env-cache"
        path.mkdir(exist_ok=True)
        return path
    return tmp_path_factory.mktemp("env-cache")


@pytest.fixture
def home(tmp_path, monkeypatch, env_cache) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(env_cache))
    return home


@pytest.fixture
def machine_tmp(tmp_path, monkeypatch) -> Path:
    """The machine's temporary folder for the test's processes (TMPDIR), empty: what is left there after is a leak."""
    path = tmp_path / "machine-tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


@pytest.fixture
def project(tmp_path):
    """project(script, manifest_yaml) → path of a tftrain.yml next to src/train.py."""

    def make(script: str = "print('hello')\n", manifest: str = "", name: str = "demo") -> Path:
        root = tmp_path / "project"
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / "src" / "train.py").write_text(textwrap.dedent(script))
        text = f"name: {name}\nsource_directory: src\nentry_script: train.py\n" + textwrap.dedent(manifest)
        (root / "tftrain.yml").write_text(text)
        return root / "tftrain.yml"

    return make


GATE_OFF = 'model: {gate: "off"}\n'


@pytest.fixture
def stand_in_project(project):
    """project(), for scripts whose model is a stand-in (bytes named saved_model.pb, which the
    model gate would load and refuse): the gate is off. A test module uses it as its `project`."""

    def make(script: str = "print('hello')\n", manifest: str = "", name: str = "demo") -> Path:
        return project(script, GATE_OFF + manifest, name)

    return make


def tftrain(*args: str, timeout: float = 600, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a process; under tests/unit, in this process (purity.in_process)."""
    if purity.holding():
        return purity.in_process(
            [TFTRAIN, *args], cwd=cwd, env={**kwargs.pop("env", os.environ), "COLUMNS": "200"}, **kwargs
        )
    return subprocess.run(
        [TFTRAIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        **kwargs,
    )


@pytest.fixture
def cli():
    return tftrain


@pytest.fixture
def repo() -> Path:
    return REPO


BASE_IMAGE = os.environ.get("TFTRAIN_TEST_BASE_IMAGE", "tftrain-test/bookworm:latest")


@pytest.fixture(scope="session")
def docker_client():
    """A real Docker daemon with the test base image (scripts/docker-up makes both). No skipping:
    without a daemon the docker tests fail, saying why."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"no Docker daemon ({exc}); run scripts/docker-up (scripts/test does)", pytrace=False)
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"base image {BASE_IMAGE} is missing; run scripts/docker-up (scripts/test does)", pytrace=False)
    return client


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API (moto's server) on 127.0.0.1, with credentials in the environment."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def http_server(tmp_path):
    """Serves tmp_path/www over plain HTTP on 127.0.0.1; yields (root directory, base URL)."""
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def lasting_cache(monkeypatch) -> Path:
    """A virtualenv cache that outlives the test session, for environments that take minutes to
    build (Horovod compiles against TensorFlow): built by the first CI run on a machine, reused after."""
    path = Path(os.environ.get("TFTRAIN_TEST_LASTING_CACHE", Path.home() / ".cache" / "tftrain-test"))
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(path))
    return path


@pytest.fixture
def kube_api():
    """A server speaking the Kubernetes REST protocol (no cluster can run here); see kube_api.py."""
    from kube_api import KubeAPI

    with KubeAPI() as api:
        yield api


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A real Docker registry (Debian's docker-registry) on 127.0.0.1; yields host:port."""
    import shutil
    import socket
    import time
    import urllib.request

    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is not installed; run scripts/docker-up (scripts/test does)", pytrace=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = tmp_path_factory.mktemp("registry")
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("docker-registry did not start", pytrace=False)
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    process.terminate()
    process.wait()
    untag_pushed(f"127.0.0.1:{port}/")


def untag_pushed(prefix: str) -> None:
    """The tags of this registry's images go with it (each ~2 GB image would otherwise stay under a
    name nothing can pull from again, run after run); the layers other tags use stay."""
    import docker

    try:
        client = docker.from_env()
        for image in client.images.list():
            for tag in image.tags:
                if tag.startswith(prefix):
                    client.images.remove(tag)
    except docker.errors.DockerException:
        pass  # no daemon: nothing was pushed


@pytest.fixture
def github_api():
    """A server speaking GitHub's REST protocol (no GitHub can run here); see github_api.py."""
    from github_api import GitHubAPI

    with GitHubAPI() as api:
        yield api


@pytest.fixture(scope="session")
def rig_keys(tmp_path_factory) -> tuple[str, str]:
    from pool_rig import key_pair

    return key_pair(tmp_path_factory.mktemp("rig-keys"))


@pytest.fixture
def pool_rig(docker_client, rig_keys, monkeypatch):
    """Test hosts (containers with sshd on a network of their own) for the pool target; the rig's
    private key reaches tftrain as the secret TFTRAIN_SSH_KEY, as a workflow would pass it."""
    from pool_rig import Rig, host_image

    private, public = rig_keys
    host_image(docker_client, BASE_IMAGE)
    rig = Rig(docker_client, public, private)
    monkeypatch.setenv("TFTRAIN_SSH_KEY", private)
    yield rig
    rig.close()


CLUSTER_LOGS = {  # what the stand-in cluster's replicas print (kube_api.logs)
    (
        "chief",
        0,
    ): "task chief:0 in cluster\nchief: coordinating 2 workers\nepoch 1: loss=0.5000\nepoch 2: loss=0.2500\n",
    ("worker", 0): "task worker:0 in cluster\n",
    ("worker", 1): "task worker:1 in cluster\n",
    ("ps", 0): "task ps:0 in cluster\n",
}


@pytest.fixture
def cluster_manifest(repo, tmp_path, kube_api, registry, monkeypatch, docker_client):
    """The parameter-server example on the stand-in cluster (kube_api), its code image pushed to
    the real registry; the replicas print CLUSTER_LOGS."""
    source = tmp_path / "ps"
    shutil.copytree(repo / "examples" / "parameter-server", source)
    manifest = source / "tftrain.yml"
    text = manifest.read_text().replace(
        "compute:\n",
        f"compute:\n  target: kubernetes\n  kubernetes:\n    namespace: training\n    registry: {registry}/team\n",
    )
    manifest.write_text(
        text + f"custom_docker_image: {BASE_IMAGE}\nframework_version: '2.18'\npip_packages: [scikit-learn]\nsecrets:"
        " [TFTRAIN_K8S_TOKEN]\n"
    )
    config = tmp_path / "kubeconfig"
    config.write_text(kube_api.kubeconfig())
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setenv("TFTRAIN_K8S_TOKEN", "k8s-secret-value")
    kube_api.logs = CLUSTER_LOGS
    return manifest


@pytest.fixture
def test_cgroup():
    """A cgroup of the test's own below this process's: what the test starts there, and run cgroups
    tftrain makes next to its own, end with the test without touching anything else on the machine."""
    from runner.targets.local.cgroup import Cgroup, runs_parent

    parent, why = runs_parent(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
    if parent is None:
        pytest.fail(f"these tests need a writable cgroup2 (tftrain runs as root on runners): {why}", pytrace=False)
    cgroup = Cgroup(parent.parent / f"tftrain-test-{uuid.uuid4().hex[:12]}")
    cgroup.path.mkdir()
    yield cgroup
    cgroup.kill()  # only what this test started lives there
    cgroup.remove()


SLURM_CONF = Path(os.environ.get("TFTRAIN_TEST_SLURM_CONF", "/tmp/tftrain-slurm/slurm.conf"))


@pytest.fixture(scope="session")
def slurm_cluster() -> Path:
    """The real two-node Slurm cluster scripts/slurm-up starts (scripts/test does), with SLURM_CONF
    set for the session's tftrain processes. No skipping: without it the Slurm tests fail, saying why."""
    if not SLURM_CONF.is_file() or shutil.which("sinfo") is None:
        pytest.fail(
            f"no Slurm cluster ({SLURM_CONF} or sinfo is missing); run scripts/slurm-up (scripts/test does)",
            pytrace=False,
        )
    os.environ["SLURM_CONF"] = str(SLURM_CONF)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=30)
    up = [
        line for line in nodes.stdout.splitlines() if line.split()[-1:] and line.split()[-1] in ("idle", "mix", "alloc")
    ]
    if nodes.returncode != 0 or len(up) < 2:
        pytest.fail(
            f"the Slurm cluster is not up ({nodes.stderr.strip() or nodes.stdout.strip()}); run scripts/slurm-up",
            pytrace=False,
        )
    return SLURM_CONF
