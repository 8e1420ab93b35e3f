"""Settings are resolved once: flag over $INPUT_* over $TFTRAIN_* over the default; a bad value is
one line naming the input; nothing outside runner/settings.py and runner/cli/ reads INPUT_*/GITHUB_*."""

from __future__ import annotations

import ast
import json
import os
import re
from argparse import Namespace
from pathlib import Path

import pytest
from conftest import REPO

from runner.errors import UnsupportedError, UsageError
from runner.settings import GITHUB_ASSET_LIMIT, ActionInputs, GitHubContext, LoggerSettings, Settings, resolve


def test_nothing_set_gives_the_defaults():
    assert resolve({}) == Settings()
    assert resolve({}).inputs == ActionInputs(
        allow_forks=False,
        fork_label="safe-to-train",
        comment=True,
        fail_on_regression=None,
        tag_pattern="*",
        tag_template="{name}-v{version}",
        runners_token=None,
        s3_bucket=None,
        s3_prefix="",
        s3_endpoint_url=None,
    )
    assert resolve({}).s3_threshold_bytes == GITHUB_ASSET_LIMIT


def test_a_flag_beats_the_input_which_beats_tftrain_which_beats_the_default():
    both = {"INPUT_TAG_PATTERN": "v*", "TFTRAIN_TAG_PATTERN": "release-*"}
    assert resolve(both, Namespace(tag_pattern="x*")).inputs.tag_pattern == "x*"
    assert resolve(both, Namespace(tag_pattern=None)).inputs.tag_pattern == "v*"
    assert resolve({"TFTRAIN_TAG_PATTERN": "release-*"}).inputs.tag_pattern == "release-*"
    assert resolve({}, Namespace(tag_pattern=None)).inputs.tag_pattern == "*"


def test_an_empty_variable_counts_as_unset():
    # GitHub sets an input nobody gave (and without a default) to ''
    environ = {
        "INPUT_FORK_LABEL": "",
        "TFTRAIN_FORK_LABEL": "reviewed",
        "INPUT_COMMENT": "",
        "INPUT_FAIL_ON_REGRESSION": "",
    }
    inputs = resolve(environ).inputs
    assert (inputs.fork_label, inputs.comment, inputs.fail_on_regression) == ("reviewed", True, None)


def test_flags_that_are_not_text_are_taken_as_parsed():
    args = Namespace(post=False, fail_on_regression=0.25, allow_forks="TRUE")
    inputs = resolve({"INPUT_COMMENT": "true", "INPUT_FAIL_ON_REGRESSION": "0.5"}, args).inputs
    assert (inputs.comment, inputs.fail_on_regression, inputs.allow_forks) == (False, 0.25, True)


def test_the_verdicts_confidence_is_an_input():
    assert resolve({"INPUT_VERDICT_CONFIDENCE": "0.9"}).inputs.verdict_confidence == 0.9
    assert resolve({}).inputs.verdict_confidence is None


def test_inputs_are_parsed():
    environ = {
        "INPUT_ALLOW_FORKS": "True", "INPUT_COMMENT": "false", "INPUT_FAIL_ON_REGRESSION": "0.05",
        "INPUT_S3_BUCKET": "models", "INPUT_S3_PREFIX": "/team/", "INPUT_S3_ENDPOINT_URL": "http://s3.local",
        "INPUT_TAG_TEMPLATE": "models/{name}/v{version}", "INPUT_RUNNERS_TOKEN": "ghp_x", "TFTRAIN_S3_THRESHOLD_BYTES": "100",
    }  # fmt: skip
    settings = resolve(environ)
    assert settings.inputs == ActionInputs(
        allow_forks=True,
        comment=False,
        fail_on_regression=0.05,
        s3_bucket="models",
        s3_prefix="team",
        s3_endpoint_url="http://s3.local",
        tag_template="models/{name}/v{version}",
        runners_token="ghp_x",
    )
    assert settings.s3_threshold_bytes == 100


@pytest.mark.parametrize(
    ("environ", "args", "message"),
    [
        ({"INPUT_FAIL_ON_REGRESSION": "abc"}, None, "input fail-on-regression: 'abc' is not a number"),
        ({"INPUT_FAIL_ON_REGRESSION": "nan"}, None, "input fail-on-regression: 'nan' is not a finite number ≥ 0"),
        ({"INPUT_FAIL_ON_REGRESSION": "-1"}, None, "input fail-on-regression: '-1' is not a finite number ≥ 0"),
        ({"INPUT_FAIL_ON_REGRESSION": "1e400"}, None, "input fail-on-regression: '1e400' is not a finite number ≥ 0"),
        ({}, Namespace(fail_on_regression="inf"), "--fail-on-regression: 'inf' is not a finite number ≥ 0"),
        (
            {"INPUT_VERDICT_CONFIDENCE": "95"},
            None,
            "input verdict-confidence: '95' is not a confidence between 0.5 and 1 (e.g. 0.95)",
        ),
        (
            {"INPUT_VERDICT_CONFIDENCE": "nan"},
            None,
            "input verdict-confidence: 'nan' is not a confidence between 0.5 and 1 (e.g. 0.95)",
        ),
        ({"INPUT_ALLOW_FORKS": "yes"}, None, "input allow-forks: 'yes' is not true or false"),
        ({"INPUT_COMMENT": "no"}, None, "input comment: 'no' is not true or false"),
        ({"TFTRAIN_COMMENT": "1"}, None, "TFTRAIN_COMMENT: '1' is not true or false"),
        ({}, Namespace(allow_forks="maybe"), "--allow-forks: 'maybe' is not true or false"),
        (
            {"TFTRAIN_S3_THRESHOLD_BYTES": "2GB"},
            None,
            "TFTRAIN_S3_THRESHOLD_BYTES: '2GB' is not a whole number of bytes",
        ),
        ({"TFTRAIN_S3_THRESHOLD_BYTES": "-1"}, None, "TFTRAIN_S3_THRESHOLD_BYTES: '-1' is not a whole number of bytes"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_input(environ, args, message):
    with pytest.raises(UsageError) as raised:
        resolve(environ, args)
    assert str(raised.value) == message and raised.value.exit_code == 2


def test_a_tag_template_without_a_version_keeps_its_error():
    with pytest.raises(UnsupportedError, match=r"^tag-template 'v1' needs \{version\} \(and usually \{name\}\)$"):
        resolve({"INPUT_TAG_TEMPLATE": "v1"})


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{version}-{x}", "only {name} and {version} are filled in, not {x}"),
        ("{version}{0}", "only {name} and {version} are filled in, not {0}"),
        ("{name.__class__}-{version}", "only {name} and {version} are filled in, not {name.__class__}"),
        ("{name!r}-{version}", "only {name} and {version} are filled in, not {name}"),
        ("{version:>9999}", "only {name} and {version} are filled in, not {version}"),
        ("{version}-{", "Single '{' encountered in format string"),
        ("{version}-{version}", "needs {version}"),
    ],
)
def test_a_tag_template_fills_in_only_name_and_version_once(template, problem):
    with pytest.raises(UnsupportedError) as raised:
        resolve({"INPUT_TAG_TEMPLATE": template})
    assert str(raised.value).startswith(f"tag-template {template!r}") and problem in str(raised.value)
    assert raised.value.exit_code == 7


def test_the_github_context(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    environ = {
        "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event), "GITHUB_REF": "refs/pull/7/merge",
        "GITHUB_REPOSITORY": "octo/models", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "42",
        "GITHUB_TOKEN": "ghs_job", "INPUT_GITHUB_TOKEN": "ghs_input",
    }  # fmt: skip
    context = resolve(environ).github
    assert context.pull_request == {"number": 7}
    assert (context.ref, context.token, context.api_url) == ("refs/pull/7/merge", "ghs_input", "https://api.github.com")
    assert context.run_url == "https://github.com/octo/models/actions/runs/42"
    assert resolve({**environ, "INPUT_GITHUB_TOKEN": ""}).github.token == "ghs_job"
    assert resolve({**environ, "GITHUB_EVENT_NAME": "push"}).github.pull_request is None
    assert GitHubContext().run_url is None and GitHubContext().token is None


def test_an_event_file_that_is_no_json_object_is_one_line(tmp_path):
    event = tmp_path / "event.json"
    event.write_text("[1, 2")
    with pytest.raises(UnsupportedError, match=f"^GITHUB_EVENT_PATH: {re.escape(str(event))} is not a JSON object$"):
        resolve({"GITHUB_EVENT_PATH": str(event)})
    assert resolve({"GITHUB_EVENT_PATH": str(tmp_path / "missing.json")}).github.payload == {}


def test_the_logger_settings():
    assert LoggerSettings.from_environment({}) == LoggerSettings()
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/s", "GITHUB_OUTPUT": "/o", "GITHUB_WORKSPACE": "/w"}
    assert LoggerSettings.from_environment(environ) == LoggerSettings(
        actions=True, color=True, step_summary=Path("/s"), output=Path("/o"), workspace=Path("/w")
    )
    # any GITHUB_ACTIONS colours the log (as before); only "true" turns workflow commands on
    assert LoggerSettings.from_environment({"GITHUB_ACTIONS": "1"}) == LoggerSettings(color=True)
    assert LoggerSettings.from_environment({"FORCE_COLOR": "1"}) == LoggerSettings(color=True)


VARIABLE = re.compile(r"(INPUT|GITHUB)_[A-Z0-9_]*")


def test_only_the_settings_and_the_cli_read_inputs_and_the_github_context():
    """A string that is an INPUT_*/GITHUB_* variable's name (or starts an f-string making one) is
    how a module reads it: nothing but runner/settings.py and runner/cli/ may."""
    readers = []
    for path in sorted((REPO / "runner").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative == "runner/settings.py" or relative.startswith("runner/cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value):
                readers.append(f"{relative}:{node.lineno}: {node.value}")
    assert readers == []


def test_the_logger_prints_to_the_job_its_settings_name(tmp_path, monkeypatch):
    import io

    from runner.telemetry.logger import Logger

    for variable in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(variable, raising=False)  # what the logger is given counts, not the environment
    stream = io.StringIO()
    settings = LoggerSettings(
        actions=True, step_summary=tmp_path / "summary.md", output=tmp_path / "output.txt", workspace=tmp_path
    )
    logger = Logger(stream, settings=settings)
    with logger.group("phase"):
        logger.step_summary("done")
        logger.outputs({"release-tag": "demo-v1"})
    logger.flush()
    assert stream.getvalue().splitlines() == ["::group::phase", "::endgroup::"]
    assert (tmp_path / "summary.md").read_text() == "done\n"
    assert "release-tag<<" in (tmp_path / "output.txt").read_text()
    assert logger.workspace_path(tmp_path / "src" / "train.py") == "src/train.py"
    assert not Logger(io.StringIO()).github


def test_an_event_file_that_cannot_be_read_is_one_line(tmp_path, monkeypatch):
    event = tmp_path / "event.json"
    event.write_text("{}")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(
        UnsupportedError, match=f"^GITHUB_EVENT_PATH: {re.escape(str(event))} cannot be read: Permission denied$"
    ):
        resolve({"GITHUB_EVENT_PATH": str(event)})


def test_pydantic_plugins_are_off_for_tftrain_alone():
    """tftrain's own process skips pydantic's plugin scan; the user's processes never see that."""
    from runner.settings import own_process, user_environment

    environ = {"PATH": "/bin"}
    with own_process(environ):
        assert environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
        assert user_environment(environ) == {"PATH": "/bin"}
    assert environ == {"PATH": "/bin"}
    users = {"PYDANTIC_DISABLE_PLUGINS": "logfire"}  # the user's own choice passes through, unchanged
    with own_process(users):
        assert users == user_environment(users) == {"PYDANTIC_DISABLE_PLUGINS": "logfire"}
    assert users == {"PYDANTIC_DISABLE_PLUGINS": "logfire"}


def test_the_training_gets_the_environment_as_the_user_set_it(monkeypatch):
    from runner.settings import own_process
    from runner.targets.interpreter import task_environment

    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    with own_process(os.environ):
        assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
        env = task_environment({"TFTRAIN_RUN_ID": "demo-1"})
    assert "PYDANTIC_DISABLE_PLUGINS" not in env and env["TFTRAIN_RUN_ID"] == "demo-1"
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ


def test_where_the_machines_clients_point_is_read_once_here(tmp_path, monkeypatch):
    """KUBECONFIG and pip's CA variables: read by resolve, handed to the targets (Target.machine)."""
    from runner.environments import host_ca_bundle
    from runner.settings import MachineClients
    from runner.targets.factory import target_for

    environ = {
        "KUBECONFIG": f"{tmp_path}/a{os.pathsep}{tmp_path}/b",
        "PIP_CERT": "",
        "SSL_CERT_FILE": "/x/ssl.pem",
        "REQUESTS_CA_BUNDLE": "/x/req.pem",
    }
    machine = resolve(environ).machine
    assert machine == MachineClients(kubeconfig=f"{tmp_path}/a", ca_bundles=("/x/req.pem", "/x/ssl.pem"))
    assert resolve({}).machine == MachineClients()
    assert target_for("kubernetes", resolve(environ)).machine == machine
    assert target_for("kubernetes").machine == MachineClients()  # no settings: nothing from the environment
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_CERT", str(bundle))  # the library reads no variable: only what it is handed
    assert host_ca_bundle([str(tmp_path / "missing.pem"), str(bundle)]) == bundle
    assert host_ca_bundle([]) != bundle
