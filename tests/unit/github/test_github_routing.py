"""The runner labels a manifest needs, and the check of the repository's runners against them."""

from __future__ import annotations

import pytest

from runner.errors import PlacementError
from runner.github.routing import check_runners, runs_on
from runner.manifest.model import Manifest


def manifest(**fields) -> Manifest:
    return Manifest.model_validate({"name": "demo", "entry_script": "train.py", **fields})


@pytest.mark.parametrize(
    ("fields", "labels"),
    [
        ({}, ["self-hosted", "linux"]),
        ({"use_gpu": True}, ["self-hosted", "linux", "gpu"]),
        ({"use_gpu": True, "compute": {"gpu_type": "a100"}}, ["self-hosted", "linux", "gpu", "a100"]),
        ({"compute": {"gpu_type": "a100"}}, ["self-hosted", "linux"]),  # no GPU asked for: the type is moot
        (
            {"use_gpu": True, "use_docker": True, "compute": {"gpu_type": "v100"}},
            ["self-hosted", "linux", "gpu", "v100", "docker"],
        ),
        ({"compute": {"target": "docker"}}, ["self-hosted", "linux", "docker"]),
    ],
)
def test_labels(fields, labels):
    assert runs_on(manifest(**fields)) == labels


def test_a_pool_job_runs_on_the_controller_not_on_a_gpu_runner():
    job = manifest(
        use_gpu=True, use_docker=True, compute={"target": "pool", "gpu_type": "a100", "runner_labels": ["team-a"]}
    )
    assert runs_on(job) == ["self-hosted", "linux", "tftrain-pool", "team-a"]


def test_runner_labels_are_added_once_ignoring_case():
    job = manifest(use_gpu=True, compute={"gpu_type": "a100", "runner_labels": ["A100", "gpu", "Linux", "big", "big"]})
    assert runs_on(job) == ["self-hosted", "linux", "gpu", "a100", "big"]


class FakeRunner:
    def __init__(self, name, labels, status="online", busy=False):
        self.name, self.status, self.busy = name, status, busy
        self.labels = [{"id": 1, "name": label, "type": "custom"} for label in labels]


class FakeGitHub:
    def __init__(self, runners):
        self.runners = runners

    def get_repo(self, name):
        assert name == "octo/models"
        return self

    def get_self_hosted_runners(self):
        return iter(self.runners)


class RecordingLogger:
    def __init__(self):
        self.lines = []

    def info(self, message):
        self.lines.append(("info", message))

    def warning(self, message):
        self.lines.append(("warning", message))


LABELS = ["self-hosted", "linux", "gpu", "a100"]


def check(runners):
    logger = RecordingLogger()
    check_runners(FakeGitHub(runners), "octo/models", LABELS, logger)
    return logger.lines


def test_an_online_runner_with_every_label_passes_whatever_the_case():
    lines = check([FakeRunner("gpu-1", ["self-hosted", "Linux", "X64", "gpu", "A100", "big"])])
    assert lines == [("info", "runner check: 1 online runner(s) of octo/models can train this (gpu-1); idle: gpu-1")]


def test_busy_runners_pass_the_job_queues():
    (line,) = check([FakeRunner("gpu-1", LABELS, busy=True), FakeRunner("gpu-2", LABELS, status="offline")])
    assert line == (
        "info",
        "runner check: every runner of octo/models that can train this is busy (gpu-1); the job will queue",
    )


def test_offline_or_mismatched_runners_fail_in_one_line():
    with pytest.raises(PlacementError) as info:
        check(
            [
                FakeRunner("gpu-1", ["self-hosted", "linux", "gpu", "v100"]),
                FakeRunner("gpu-2", LABELS, status="offline"),
            ]
        )
    message = str(info.value)
    assert message.startswith(
        "no online self-hosted runner of octo/models has the labels self-hosted, linux, gpu, a100; its runners: "
        "gpu-1 (online: self-hosted, linux, gpu, v100), gpu-2 (offline: self-hosted, linux, gpu, a100); "
    )
    assert "\n" not in message and info.value.exit_code == 19


def test_long_runner_lists_are_cut():
    with pytest.raises(PlacementError) as info:
        check([FakeRunner(f"cpu-{index}", ["self-hosted", "linux"]) for index in range(25)])
    assert "cpu-9 (online: self-hosted, linux) … and 15 more;" in str(info.value)
    assert "cpu-10 " not in str(info.value)


def test_no_runners_at_all_points_at_the_settings():
    with pytest.raises(PlacementError) as info:
        check([])
    assert str(info.value).startswith(
        "octo/models has no self-hosted runners: add one with the labels self-hosted, linux, gpu, a100 (Settings →"
        " Actions → Runners)"
    )
