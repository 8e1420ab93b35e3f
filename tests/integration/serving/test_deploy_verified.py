"""`tftrain deploy --verify-key` for real: the serving image built as deploy builds it with the
verifier (OpenSSF model signing in its environment, model.sig beside the version), and the
InferenceService's init container command run by docker against the image's own version, an
intact copy and a tampered copy mounted over it: exit 0, 0, and non-zero with one line."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from conftest import BASE_IMAGE
from test_deploy import exported, register  # noqa: F401 (exported: the session fixture)
from test_serve_verified import pem_pair

from runner.serving.imageref import parse_reference

SECRET = "MODEL_SIGNING_KEY"


def run_init(
    client, image: str, container: dict, volume: Path | None = None, env: dict | None = None
) -> tuple[int, str, str]:
    """The init container as Kubernetes runs it: its command and env, in the image."""
    values = {item["name"]: item["value"] for item in container.get("env", [])} | (env or {})
    runner = client.containers.run(
        image,
        container["command"],
        environment=values,
        detach=True,
        volumes={str(volume): {"bind": "/models/digits", "mode": "ro"}} if volume else None,
    )
    try:
        code = runner.wait(timeout=300)["StatusCode"]
        return code, runner.logs(stdout=True, stderr=False).decode(), runner.logs(stdout=False, stderr=True).decode()
    finally:
        runner.remove(force=True)


def test_the_init_container_verifies_the_image_and_refuses_a_tampered_volume(home, tmp_path, exported, docker_client):  # noqa: F811
    from runner.deploy import build as deploy
    from runner.history.checksums import copy_file
    from runner.history.signing import SIGNATURE, sign_with_key, verify
    from runner.history.trust import SignerKey
    from runner.serving.image import ServingResources, copy_version
    from runner.serving.inference_service import ServiceSpec
    from runner.serving.verify_model import INIT_CONTAINER, KEY_VARIABLE, Verifier
    from runner.telemetry.logger import Logger

    private, public = pem_pair()
    model = register(home, exported)
    sign_with_key(model.path, model.path / SIGNATURE, private, SECRET)
    files = copy_version(model, tmp_path / "version")
    verify(files.root, model.path / SIGNATURE, SignerKey(public, "pub.pem"), model.label)
    copy_file(model.path / SIGNATURE, files.root / SIGNATURE)
    logger = Logger(io.StringIO())
    image = deploy.build(
        docker_client,
        files,
        "tftrain-test/verified",
        parse_reference(BASE_IMAGE, "--base-image"),
        logger,
        tmp_path / "build.log",
        verifier=True,
    )
    verifier = Verifier.of(SignerKey(public, "pub.pem"), model.name)
    document = ServiceSpec("digits", "serving", image.tags[0], ServingResources(), {}, None, verifier).document()
    (init,) = document["spec"]["predictor"]["initContainers"]
    assert init["name"] == INIT_CONTAINER and init["image"] == image.tags[0]

    code, out, err = run_init(docker_client, image.tags[0], init)  # the image's own /models/digits
    assert code == 0 and "/models/digits is what model.sig signed" in out, out + err

    intact = tmp_path / "intact"
    shutil.copytree(files.root, intact)
    code, out, err = run_init(docker_client, image.tags[0], init, intact)
    assert code == 0, out + err

    tampered = tmp_path / "tampered"
    shutil.copytree(files.root, tampered)
    (tampered / "serving" / "serving.json").write_text(json.dumps({"tampered": True}))
    code, out, err = run_init(docker_client, image.tags[0], init, tampered)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 29 and len(lines) == 1 and "changed: 'serving/serving.json'" in lines[0], out + err

    added = tmp_path / "added"
    shutil.copytree(files.root, added)
    (added / "model" / "extra.bin").write_bytes(b"x")
    code, out, err = run_init(docker_client, image.tags[0], init, added)
    assert code == 29 and "added (not signed): 'model/extra.bin'" in err, out + err

    (tmp_path / "unsigned").mkdir()
    shutil.copytree(files.root / "model", tmp_path / "unsigned" / "model")
    code, out, err = run_init(docker_client, image.tags[0], init, tmp_path / "unsigned")
    assert code == 29 and "model.sig is missing" in err, out + err

    code, out, err = run_init(docker_client, image.tags[0], init, env={KEY_VARIABLE: pem_pair()[1].decode()})
    assert code == 29 and "model.sig was not made with the key $TFTRAIN_MODEL_PUBLIC_KEY" in err, out + err

    code, out, err = run_init(
        docker_client, image.tags[0], init, env={KEY_VARIABLE: private}
    )  # a private key is no public key
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and "not a PEM EC public key" in err and "PRIVATE" not in err
    ), out + err
