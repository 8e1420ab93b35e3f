"""What the docker target's containers are told: one output stream where the image is tftrain's
(and a pod's command is left as it is)."""

from __future__ import annotations

import pytest

from runner.history.rundir import RunPaths
from runner.manifest import load_manifest
from runner.targets.base import CANNOT_START_SH, Environment
from runner.targets.container import ONE_STREAM
from runner.targets.docker.target import DockerTarget
from runner.targets.kubernetes.target import KubernetesTarget


def container_of(target, project, tmp_path, details: dict):
    loaded = load_manifest(project(manifest="use_docker: true\n"))
    env = Environment(
        "/opt/tftrain/venv/bin/python", "image", reused=True, isolated=True, image="demo:1", details=details
    )
    _, container = target.runtime(loaded, env, RunPaths.for_run(tmp_path / "home", "demo-1", loaded.manifest), {}, None)
    return container


@pytest.mark.parametrize(
    ("details", "one_stream"), [({}, True), ({"user_managed": True}, False)], ids=["built", "as-it-is"]
)
def test_an_image_tftrain_built_joins_stderr_to_stdout_and_one_as_it_is_does_not(
    project, tmp_path, details, one_stream
):
    assert container_of(DockerTarget(), project, tmp_path, details).one_stream is one_stream


def test_a_pods_command_is_the_argv_as_it_is(project, tmp_path):
    assert container_of(KubernetesTarget(), project, tmp_path, {}).one_stream is False


def test_the_one_stream_step_passes_the_argv_on_untouched():
    shell, flag, script, name = ONE_STREAM
    assert (shell, flag, name) == ("/bin/sh", "-c", "tftrain-task")
    assert script == f'exec 2>&1; {CANNOT_START_SH}; exec "$@"'  # the argv is never part of the script
