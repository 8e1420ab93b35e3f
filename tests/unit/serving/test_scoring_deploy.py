"""`tftrain deploy` of a version with a scoring script, as data: the environment holds azmlinfsrv
and the script's packages (no KServe), the image's command is the scoring server, the smoke test
compares /score's answer with run()'s in the gate; the InferenceService's custom container."""

from __future__ import annotations

import pytest

from runner.serving.image import ServingResources, environment_spec, server_command
from runner.serving.imageref import parse_reference
from runner.serving.inference_service import CONTAINER, ServiceSpec
from runner.serving.scoring.smoke import differs


def test_the_scoring_environment_is_azmlinfsrv_the_models_tensorflow_and_the_scripts_packages():
    spec = environment_spec(
        parse_reference("python:3.11-slim", "--base-image"),
        "sha256:1",
        "2.18.1",
        False,
        None,
        ("pillow", "joblib==1.4.2"),
    )
    packages = spec.labels["tftrain.serving.packages"].split()
    assert packages == ["tensorflow-cpu==2.18.1", "azureml-inference-server-http==1.5.1", "pillow", "joblib==1.4.2"]
    assert "kserve" not in spec.dockerfile
    plain = environment_spec(parse_reference("python:3.11-slim", "--base-image"), "sha256:1", "2.18.1", False, None)
    assert plain.tag != spec.tag and "kserve" in plain.dockerfile


def test_a_scripts_package_reaches_pip_as_one_quoted_word():
    spec = environment_spec(
        parse_reference("python:3.11-slim", "--base-image"), "sha256:1", "2.18.1", False, None, ("numpy; rm -rf /",)
    )
    assert "'numpy; rm -rf /'" in spec.dockerfile


def test_the_image_runs_the_scoring_server():
    assert server_command("digits", scoring=True)[:3] == ["python", "-m", "runner.serving.scoring.server"]
    assert server_command("digits")[:3] == ["python", "-m", "runner.serving.server"]


def test_the_inference_service_is_a_custom_predictor_container_of_the_image():
    document = ServiceSpec(
        "digits", "default", "registry.example/d@sha256:" + "0" * 64, ServingResources(), {}, "digits-key"
    ).document()
    (container,) = document["spec"]["predictor"]["containers"]
    assert container["name"] == CONTAINER and container["image"].endswith("0" * 64)
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "digits-key", "key": "token"}


@pytest.mark.parametrize(
    "have, want, told",
    [
        ([0, 1], [0, 1], None),
        ([0.1, 2.00001], [0.1, 2.0], None),
        ({"a": [1]}, {"a": [1]}, None),
        ([0, 2], [0, 1], "the answer[1] is 2, not 1"),
        ([0], [0, 1], "the answer has 1 items, not 2"),
        ({"b": 1}, {"a": 1}, "the answer has the keys ['b'], not ['a']"),
        (True, 1, "the answer is True, not 1"),
        ("x", ["x"], "the answer is 'x', not \"['x']\""),
    ],
)
def test_the_smoke_test_compares_answers_as_json(have, want, told):
    assert differs(have, want) == told


@pytest.mark.parametrize("expected", ["{not json", "\xff", "[" * 100_000 + "]" * 100_000])
def test_a_release_answer_that_is_no_json_is_one_deploy_error(tmp_path, monkeypatch, expected):
    from types import SimpleNamespace

    from runner.errors import DeployError
    from runner.serving.scoring import smoke

    (tmp_path / "scoring").mkdir()
    (tmp_path / "scoring" / "sample-request.json").write_text('{"data": [1]}')
    (tmp_path / "scoring" / "answer.json").write_bytes(expected.encode("latin-1"))
    monkeypatch.setattr(smoke, "post", lambda url, body, token: (200, b"[1]"))
    files = SimpleNamespace(root=tmp_path, scoring={"script": "score.py", "sample_request": "abc"})
    with pytest.raises(DeployError, match="cannot be compared"):
        smoke.smoke_scoring("http://127.0.0.1:1", files, None, SimpleNamespace(info=lambda *a, **k: None))
