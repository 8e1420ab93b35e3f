"""Hostile corpus, deploy: image references that would inject into the serving Dockerfile (a newline
then RUN, a space, an empty value, credentials, odd Unicode) are one UsageError line (exit 2)
before anything is looked up, built or rendered; what is rendered is one FROM line; the
InferenceService takes the server's key from a secret and never holds it."""

from __future__ import annotations

import re
import time

import pytest
import yaml
from hostile import assert_refused, nothing_written_outside

from runner.errors import ManifestError, UsageError
from runner.serving.guard import TOKEN_VARIABLE
from runner.serving.image import ServingResources, environment_spec
from runner.serving.imageref import parse_reference, parse_repository

INJECTIONS = [
    "python:3.11\nRUN touch /tmp/pwned",
    "python:3.11\rRUN touch /tmp/pwned",
    "python:3.11 AS base\nRUN id",
    "python:3.11\n",
    "python\u20283.11",  # LINE SEPARATOR: a line break to some readers
    "python:3.11\x00",
    "py thon",
    "",
    " ",
    "\t",
    "https://user:hunter2-Zx9@registry.example/x",
    "user:hunter2-Zx9@registry.example/x",
    "registry.example/Team/x",
    "registry.example/x:" + "t" * 129,
    "python@sha256:abc",
    "python@sha256:" + "g" * 64,
    "-python",
    "python:-tag",
    "a" * 256,
    "ｐｙｔｈｏｎ:3.11",  # full-width letters
    "python:3.11$(id)",
    "python:3.11;id",
    "{{ base_image }}",
]

VALID = [
    "python:3.11-slim-bookworm",
    "tftrain-test/bookworm:latest",
    "localhost:5000/team/x:v1",
    "registry.example:5000/a/b_c/d-e.f:1.0",
    "[::1]:5000/x",
    "python@sha256:" + "a" * 64,
    "python:3.11@sha256:" + "0" * 64,
]


@pytest.mark.parametrize("reference", INJECTIONS, ids=range(len(INJECTIONS)))
def test_a_hostile_base_image_is_one_line_exit_2(reference, tmp_path, home, cli):
    with nothing_written_outside(tmp_path):
        result = cli("deploy", "digits@v1", "--image", "registry.example/team/x", f"--base-image={reference}")
    line = assert_refused(result, UsageError, "--base-image")
    assert "hunter2-Zx9" not in result.stdout + result.stderr and "\x00" not in line
    assert not home.exists()  # nothing was looked up


@pytest.mark.parametrize("reference", INJECTIONS, ids=range(len(INJECTIONS)))
def test_a_hostile_image_repository_is_refused(reference):
    with pytest.raises(UsageError, match="^--image ") as raised:
        parse_repository(reference, "--image")
    assert len(str(raised.value).splitlines()) == 1 and "hunter2-Zx9" not in str(raised.value)


@pytest.mark.parametrize("reference", ["a-a" * 300_000 + "/!", "a." * 500_000, "x" * 1_000_000])
def test_a_huge_reference_is_refused_at_once(reference):
    started = time.monotonic()
    with pytest.raises(UsageError, match="longer than 1024 characters"):
        parse_reference(reference, "--base-image")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("reference", VALID)
def test_a_rendered_dockerfile_has_one_from_line_of_the_reference(reference):
    parsed = parse_reference(reference, "--base-image")
    assert str(parsed) == reference
    dockerfile = environment_spec(parsed, None, "2.18.1", False, None).dockerfile
    assert re.findall(r"^FROM .*$", dockerfile, re.MULTILINE) == [
        f"FROM {reference} AS base",
        "FROM base AS dependencies",
        "FROM base",
    ]
    assert dockerfile == environment_spec(
        parse_reference("python:3.11-slim-bookworm", "x"), None, "2.18.1", False, None
    ).dockerfile.replace("python:3.11-slim-bookworm", reference)  # the reference changes one word, never the lines


def test_environment_spec_takes_only_a_parsed_reference():
    with pytest.raises(TypeError):  # a caller cannot skip the parser
        _ = environment_spec("python\nRUN id", None, "2.18.1", False, None).dockerfile  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--namespace", "Prod\nx"),
        ("--namespace", ""),
        ("--auth-secret", "a b"),
        ("--auth-secret", "-x"),
        ("--auth-secret", "x" * 300),
    ],
)
def test_kubernetes_names_are_checked_before_anything(option, value, tmp_path, home, cli):
    with nothing_written_outside(tmp_path):
        result = cli(
            "deploy", "digits@v1", "--image", "r.example/x", "--target", "kubernetes", "--push", f"{option}={value}"
        )
    assert_refused(result, UsageError, option)
    assert not home.exists()


def test_auth_secret_needs_the_kubernetes_target(home, cli):
    result = cli("deploy", "digits@v1", "--image", "r.example/x", "--auth-secret", "serving-key")
    assert_refused(result, UsageError, "--auth-secret", TOKEN_VARIABLE)


def test_the_inference_service_takes_the_key_from_a_secret():
    from runner.serving.inference_service import ServiceSpec, to_yaml

    image = "r.example/team/digits@sha256:" + "a" * 64
    plain = ServiceSpec("digits", "default", image, ServingResources(), {}).document()
    assert "env" not in plain["spec"]["predictor"]["containers"][0]
    document = yaml.safe_load(
        to_yaml(ServiceSpec("digits", "default", image, ServingResources(), {}, "serving-key").document())
    )
    container = document["spec"]["predictor"]["containers"][0]
    assert container["env"] == [
        {"name": TOKEN_VARIABLE, "valueFrom": {"secretKeyRef": {"name": "serving-key", "key": "token"}}}
    ]


@pytest.mark.parametrize(
    "reference",
    [
        "python:3.11\nRUN touch /tmp/pwned",
        "py thon",
        "",
        "user:hunter2-Zx9@registry.example/x",
        "team/TF:1",
        "python:3.11\u2028RUN id",
    ],
)
def test_a_hostile_custom_docker_image_is_refused_before_a_dockerfile_is_rendered(
    reference, project, home, cli, tmp_path
):
    import json

    manifest = project(manifest=f"custom_docker_image: {json.dumps(reference)}\ncompute: {{target: docker}}\n")
    with nothing_written_outside(tmp_path, home):
        for command in ("validate", "plan"):
            result = cli(command, "-f", str(manifest))
            assert_refused(result, ManifestError, "custom_docker_image")
            assert "FROM " not in result.stdout and "hunter2-Zx9" not in result.stdout + result.stderr


@pytest.mark.parametrize("seconds", ["nan", "inf", "-1", "0", "1e300"])
def test_a_ready_timeout_that_would_wait_forever_is_refused(seconds, home, cli):
    result = cli("deploy", "digits@v1", "--image", "r.example/x", f"--ready-timeout={seconds}")
    assert_refused(result, UsageError, "--ready-timeout")
    assert not home.exists()
