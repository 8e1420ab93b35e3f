"""`tftrain deploy` for real: a Keras model exported by TensorFlow, registered with the serving
files the gate writes, built into a serving image by the real dockerd, smoke-tested through
HTTP, pushed to a real registry; the InferenceService applied to the stand-in Kubernetes API.

The first run on a machine builds the serving environment (KServe and TensorFlow from PyPI, a
few minutes); later runs find it by its content tag."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import textwrap
import urllib.request
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, tftrain
from kube_api import KubeAPI

from runner.errors import ClusterError, DeployError
from runner.history.model_registry import Registry
from runner.history.store import Store
from runner.serving.imageref import parse_reference

EXPORT = textwrap.dedent("""
    import sys
    import numpy as np, keras, tensorflow as tf
    out = sys.argv[1]
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4, activation="softmax")])
    model.export(out + "/sm")
    signature = tf.saved_model.load(out + "/sm").signatures["serving_default"]
    name = list(signature.structured_input_signature[1])[0]
    x = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
    y = signature(**{name: tf.constant(x)})
    np.savez(out + "/sample.npz", **{name: x})
    np.savez(out + "/predictions.npz", **{key: value.numpy() for key, value in y.items()})
    print(tf.__version__, name, ",".join(y))
    """)
# A stand-in for runner.serving.server (TensorFlow Serving's v1 routes only), to prove the image's
# plumbing before the real server exists: the model loaded by modelio, the port opened once ready.
STUB_SERVER = textwrap.dedent("""
    import argparse, json, signal, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from pathlib import Path
    from runner.serving import modelio
    from runner.serving.signature import locate
    parser = argparse.ArgumentParser()
    for option in ("--model-dir", "--name", "--host", "--port", "--runtime"):
        parser.add_argument(option)
    args = parser.parse_args()
    model = modelio.TensorFlowModel(locate(Path(args.model_dir) / "model"))
    signature = model.default_signature()
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code); self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
        def do_GET(self):
            self._send(200 if self.path == f"/v1/models/{args.name}" else 404, {"model_version_status": [{"state": "AVAILABLE"}]})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            values = modelio.conform_all(modelio.request_values(body, signature), signature)
            outputs = model.predict(values, signature.name)
            self._send(200, {"predictions": next(iter(outputs.values())).tolist()})
    server = HTTPServer((args.host, int(args.port)), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()
    """)


@pytest.fixture(scope="session")
def exported(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("exported")
    done = subprocess.run([sys.executable, "-c", EXPORT, str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    version, name, outputs = done.stdout.split()[-3:]
    return out, version


def register(home: Path, exported: tuple[Path, str], serving: bool = True, resources: dict | None = None):
    """digits@v1 as the gate leaves it: model/, serving/ and version.json's "serving"."""
    out, tf_version = exported
    with Store(home) as store:
        model = Registry(store).register(
            "digits", out / "sm", "run-1", {"framework_version": tf_version, "git": {"commit": "c0ffee" * 6 + "beef"}}
        )
        info = dict(model.info, serving_resources=resources or {"cpu": "1", "memory": "1Gi", "gpu": 0})
        if serving:
            (model.path / "serving").mkdir()
            for name in ("sample.npz", "predictions.npz"):
                (model.path / "serving" / name).write_bytes((out / name).read_bytes())
            document = {
                "format": "saved_model",
                "path": ".",
                "signatures": {},
                "signature": "serving_default",
                "tensorflow": tf_version,
                "onnx": None,
            }
            (model.path / "serving" / "serving.json").write_text(json.dumps(document))
            files = {
                f"serving/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
                for p in (model.path / "serving").iterdir()
            }
            info["serving"], info["extras"] = document, files
        (model.path / "version.json").write_text(json.dumps(info))
        store.db.execute(
            "UPDATE models SET info = ? WHERE name = ? AND version = ?", (json.dumps(info), model.name, model.version)
        )
        return Registry(store).get("digits", 1)


def one_line_error(result, code: int, text: str) -> None:
    assert result.returncode == code, result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0], result.stderr


def manifest_digest(registry: str, repository: str, tag: str) -> str:
    accept = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}", headers={"Accept": accept}, method="HEAD"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["Docker-Content-Digest"]


# --- the image, proven with a stand-in server ----------------------------------------------


def test_image_is_built_once_proven_and_pushed(home, tmp_path, exported, docker_client, registry):
    from runner.deploy import build as deploy
    from runner.deploy import smoke
    from runner.serving.image import ServingResources, copy_version
    from runner.telemetry.logger import Logger

    model = register(home, exported)
    files = copy_version(model, tmp_path / "version")
    lines = io.StringIO()
    logger = Logger(lines)
    repository = f"{registry}/team/digits"
    image = deploy.build(
        docker_client, files, repository, parse_reference(BASE_IMAGE, "--base-image"), logger, tmp_path / "build.log"
    )
    # a second deploy of the same version builds nothing: both layers are found by their content tags
    again = deploy.build(
        docker_client, files, repository, parse_reference(BASE_IMAGE, "--base-image"), logger, tmp_path / "build.log"
    )
    logger.flush()
    assert (
        again.tags == image.tags
        and "(cached)" in lines.getvalue()
        and "built with this content before" in lines.getvalue()
    )
    assert (
        re.fullmatch(rf"{re.escape(repository)}:sha-[0-9a-f]{{16}}", image.tags[0])
        and image.tags[1] == f"{repository}:digits-v1"
    )

    built = docker_client.images.get(image.tags[1])
    labels = built.labels
    assert (
        labels["org.opencontainers.image.version"] == "v1" and labels["tftrain.model.commit"] == "c0ffee" * 6 + "beef"
    )
    assert labels["tftrain.model.sha256"] == hashlib.sha256((model.path / "SHA256SUMS").read_bytes()).hexdigest()
    config = built.attrs["Config"]
    assert config["User"] == "1000:1000" and "8080/tcp" in config["ExposedPorts"]
    assert config["Cmd"][:3] == ["python", "-m", "runner.serving.server"] and "/models/digits" in config["Cmd"]
    listing = docker_client.containers.run(
        image.tags[0], ["ls", "/models/digits", "/models/digits/serving"], remove=True
    ).decode()
    assert {"model", "serving", "sample.npz", "predictions.npz", "serving.json"} <= set(listing.split())

    stub = _with_stub_server(docker_client, image, tmp_path)
    smoke.smoke_test(docker_client, stub, files, ServingResources.of(model.info), 120, logger)
    logger.flush()
    assert "the sample's predictions match the gate's" in lines.getvalue()

    digest = deploy.push(docker_client, image, logger)
    assert digest.startswith("sha256:") and manifest_digest(registry, "team/digits", "digits-v1") == digest
    assert manifest_digest(registry, "team/digits", image.content_tag) == digest

    # a registry that cannot be reached: one line, and no tag of the version was pushed anywhere
    refused = dataclasses.replace(image, repository="127.0.0.1:9/team/digits")
    built.tag(refused.repository, refused.content_tag)
    built.tag(refused.repository, refused.version_tag)
    with pytest.raises(DeployError) as raised:
        deploy.push(docker_client, refused, logger)
    assert "\n" not in str(raised.value) and "127.0.0.1:9/team/digits:sha-" in str(raised.value)
    for tag in refused.tags:
        docker_client.images.remove(tag)


def test_smoke_test_fails_when_predictions_differ(home, tmp_path, exported, docker_client):
    import numpy as np

    from runner.deploy import build as deploy
    from runner.deploy import smoke
    from runner.serving.image import ServingResources, copy_version
    from runner.telemetry.logger import Logger

    model = register(home, exported)
    files = copy_version(model, tmp_path / "version")
    logger = Logger(io.StringIO())
    image = deploy.build(
        docker_client,
        files,
        "tftrain-test/deploy",
        parse_reference(BASE_IMAGE, "--base-image"),
        logger,
        tmp_path / "build.log",
    )
    stub = _with_stub_server(docker_client, image, tmp_path)
    with np.load(files.predictions) as archive:
        wrong = {key: archive[key] + 0.01 for key in archive.files}
    np.savez(files.predictions, **wrong)
    with pytest.raises(DeployError, match=r"differs from the gate's predictions by 0\.01"):
        smoke.smoke_test(docker_client, stub, files, ServingResources.of(model.info), 120, logger)
    assert not docker_client.containers.list(all=True, filters={"label": "tftrain.deploy=digits@v1"})


def _with_stub_server(client, image, tmp_path: Path):
    """The model image with STUB_SERVER as runner.serving.server, same CMD."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as archive:
        for name, data in {
            "Dockerfile": f"FROM {image.tags[0]}\nCOPY server.py /opt/tftrain/python/runner/serving/server.py\n",
            "server.py": STUB_SERVER,
        }.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data.encode()), 0o644
            archive.addfile(info, io.BytesIO(data.encode()))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag="tftrain-test/deploy-stub:latest", rm=True)
    return dataclasses.replace(image, repository="tftrain-test/deploy-stub", content_tag="latest")


# --- the command, with the real server ------------------------------------------------------


def test_deploy_pushes_the_image_the_real_server_answers_from(home, exported, docker_client, registry):
    register(home, exported)
    result = tftrain(
        "deploy",
        "digits@latest",
        "--image",
        f"{registry}/team/served",
        "--push",
        "--base-image",
        BASE_IMAGE,
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr + result.stdout[-3000:]
    assert "the sample's predictions match the gate's" in result.stdout
    digest = manifest_digest(registry, "team/served", "digits-v1")
    assert f"{registry}/team/served@{digest}" in result.stdout


# --- one line for each refusal --------------------------------------------------------------


def test_refusals_are_one_line(home, tmp_path, exported, monkeypatch):
    register(home, exported)
    one_line_error(
        tftrain("deploy", "nope@v3", "--image", "registry.example/team/x"), 5, "model nope@v3 is not registered"
    )
    one_line_error(
        tftrain("deploy", "digits@v1", "--image", "registry.example/Team/x:latest"),
        2,
        "--image 'registry.example/Team/x:latest'",
    )
    one_line_error(tftrain("deploy", "digits@v1", "--image", "r.example/x", "--target", "kubernetes"), 2, "add --push")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    one_line_error(
        tftrain("deploy", "digits@v1", "--image", "registry.example/team/x"), 9, "cannot reach the Docker daemon"
    )


def test_a_version_without_a_loadable_model_is_refused(home, tmp_path):
    source = tmp_path / "weights"
    source.mkdir()
    (source / "checkpoint.ckpt").write_bytes(b"not a model")
    with Store(home) as store:
        Registry(store).register("digits", source, None, {})
    one_line_error(
        tftrain("deploy", "digits@v1", "--image", "registry.example/team/x"),
        27,
        "holds no SavedModel or .keras/.h5 file",
    )


# --- the InferenceService on the stand-in Kubernetes API ------------------------------------


class ServingAPI(KubeAPI):
    """The stand-in API server, also storing KServe InferenceServices (create, get, replace)."""

    PATH = re.compile(
        r"^/apis/serving\.kserve\.io/v1beta1/namespaces/(?P<ns>[^/]+)/inferenceservices(?:/(?P<name>[^/]+))?$"
    )

    def __init__(self) -> None:
        self.services: dict[str, dict] = {}
        super().__init__()

    def _handler(self):
        api, base = self, super()._handler()

        class Handler(base):
            def _service(self, method: str) -> bool:
                match = api.PATH.match(self.path.split("?")[0])
                if not match or self._injected(method, match.group(0)):
                    return bool(match)
                api.requests.append((method, match.group(0)))
                name = match["name"]
                if method == "POST":
                    document = self._body()
                    if document["metadata"]["name"] in api.services:
                        self._status(409, "AlreadyExists", "exists")
                    else:
                        api.services[document["metadata"]["name"]] = {
                            **document,
                            "metadata": {**document["metadata"], "resourceVersion": "1"},
                        }
                        self._send(201, document)
                elif name not in api.services:
                    self._status(404, "NotFound", f"{name} not found")
                elif method == "GET":
                    self._send(200, api.services[name])
                else:
                    document = self._body()
                    if document["metadata"].get("resourceVersion") != api.services[name]["metadata"]["resourceVersion"]:
                        self._status(409, "Conflict", "the object has been modified")
                    else:
                        document["metadata"]["resourceVersion"] = str(int(document["metadata"]["resourceVersion"]) + 1)
                        api.services[name] = document
                        self._send(200, document)
                return True

            def do_POST(self):
                if not self._service("POST"):
                    super().do_POST()

            def do_GET(self):
                if not self._service("GET"):
                    super().do_GET()

            def do_PUT(self):
                if not self._service("PUT"):
                    super().do_PUT()

        return Handler


def test_inference_service_is_created_then_replaced(tmp_path):
    from runner.serving.image import ServingResources
    from runner.serving.inference_service import CONTAINER, ServiceClient, ServiceSpec

    config = tmp_path / "kubeconfig"
    with ServingAPI() as api:
        config.write_text(api.kubeconfig())
        spec = ServiceSpec(
            "digits",
            "serving",
            "r.example/team/digits@sha256:" + "a" * 64,
            ServingResources("2", "1Gi", 1),
            {"tftrain/version": "v1"},
        )
        assert ServiceClient(config, spec.document()).apply() == "created"
        newer = dataclasses.replace(spec, image="r.example/team/digits@sha256:" + "b" * 64)
        assert ServiceClient(config, newer.document()).apply() == "replaced"
        (container,) = api.services["digits"]["spec"]["predictor"]["containers"]
        assert container["name"] == CONTAINER and container["image"].endswith("b" * 64)
        assert container["resources"]["limits"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}
        assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
        api.fail("POST", "/apis/serving.kserve.io/*", 403)
        with pytest.raises(
            ClusterError, match=r"^Kubernetes: creating InferenceService serving/digits answered 403 Forbidden"
        ):
            ServiceClient(config, spec.document()).apply()


# --- the release links the image by digest ----------------------------------------------------


def test_release_body_links_the_image_by_digest(github_api, monkeypatch):
    from runner.deploy.release import link_release
    from runner.serving.image import ModelImage
    from runner.telemetry.logger import Logger

    for key, value in {
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
    }.items():
        monkeypatch.setenv(key, value)
    release = github_api.add_release("octo", "models", "digits-v1", {}, body="# digits v1\n")
    image = ModelImage(None, "ghcr.io/octo/digits", "digits-v1", "sha-0123456789abcdef")
    for digest in ("sha256:" + "a" * 64, "sha256:" + "b" * 64):  # a second deploy replaces the line
        link_release("digits-v1", image, digest, Logger(io.StringIO()))
    assert release["body"].startswith("# digits v1\n") and release["body"].count("Serving image") == 1
    assert f"`ghcr.io/octo/digits@sha256:{'b' * 64}`" in release["body"] and not release["draft"]
    with pytest.raises(DeployError, match="404"):
        link_release("digits-v9", image, "sha256:" + "c" * 64, Logger(io.StringIO()))


def test_kubernetes_target_prints_and_applies(tmp_path, capsys):
    import types

    import yaml

    from runner.deploy.kubernetes import render_service
    from runner.serving.image import ServingResources
    from runner.telemetry.logger import Logger

    config = tmp_path / "kubeconfig"
    model = types.SimpleNamespace(name="Digits_v", version=4)
    image = "r.example/team/digits@sha256:" + "d" * 64
    with ServingAPI() as api:
        config.write_text(api.kubeconfig())
        render_service(model, ServingResources(), image, Logger(io.StringIO()), "serving", None, "serving-key", config)
        printed = yaml.safe_load(capsys.readouterr().out)
        # the server's key comes from the secret when the pod starts; the document only names it
        assert printed["spec"]["predictor"]["containers"][0]["env"] == [
            {"name": "TFTRAIN_SERVING_TOKEN", "valueFrom": {"secretKeyRef": {"name": "serving-key", "key": "token"}}}
        ]
        assert printed["metadata"]["name"] == "digits-v" and printed["metadata"]["labels"]["tftrain/version"] == "v4"
        assert api.services["digits-v"]["spec"] == printed["spec"]
        assert printed["spec"]["predictor"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
