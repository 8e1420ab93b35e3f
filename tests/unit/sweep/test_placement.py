"""A sweep's concurrent trials on this machine: the GPUs tftrain may use split into one share per
trial (runner.sweep.placement), and a share reaching the trial's processes (local target) and
containers (docker target) as the GPUs they may use."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from builders import Notes

from runner.errors import UnsupportedError
from runner.manifest.sweep import SweptManifest
from runner.settings import Settings
from runner.shared.machine import named_gpus
from runner.sweep.placement import check_concurrency, gpu_shares, usable_gpus
from runner.targets.interpreter import task_environment
from runner.targets.local.target import LocalTarget

SWEEP = {
    "sampling_algorithm": {"type": "random"},
    "search_space": {"--lr": {"type": "choice", "values": [1, 2]}},
    "objective": {"primary_metric": "loss", "goal": "minimize"},
}


def manifest(**fields) -> SweptManifest:
    return SweptManifest.model_validate(
        {"name": "m", "entry_script": "train.py", "use_gpu": True, "sweep": SWEEP, **fields}
    )


def found(count):
    return lambda cuda_visible_devices: count


def shares_of(manifest: SweptManifest, concurrent: int, visible: str | None, count) -> list[str | None]:
    """What a sweep of `concurrent` trials at once gives each: the GPUs check_concurrency found, split."""
    return gpu_shares(check_concurrency(manifest, Notes(), visible, count=found(count)), concurrent)


@pytest.mark.parametrize(
    ("visible", "count", "concurrent", "shares"),
    [
        (None, 4, 2, ["0,1", "2,3"]),
        (None, 3, 2, ["0", "1"]),  # the third GPU stays idle: shares are equal
        (None, 8, 3, ["0,1", "2,3", "4,5"]),
        ("2,3,5", 8, 3, ["2", "3", "5"]),  # tftrain's own CUDA_VISIBLE_DEVICES, as it names them
        ("GPU-aa,GPU-bb", 2, 2, ["GPU-aa", "GPU-bb"]),
        ("1,0,-1,2", 4, 2, ["1", "0"]),  # CUDA ignores everything from -1 on
        ("0,0,1,1", 4, 2, []),  # a GPU named twice is never two GPUs (one share of "0" each would share it)
        ("0,1,0,2", 4, 2, ["0", "1"]),
    ],
)
def test_the_gpus_are_split_into_one_share_per_concurrent_trial(visible, count, concurrent, shares):
    assert shares_of(manifest(), concurrent, visible, count) == (shares or [None] * concurrent)


@pytest.mark.parametrize(
    ("fields", "concurrent", "count"),
    [
        ({}, 1, 4),  # one trial at a time has every GPU, as a run has
        ({"use_gpu": False}, 2, 4),
        ({"compute": {"target": "pool"}}, 2, 4),  # the pool's leases place each trial's GPUs
        ({"compute": {"target": "slurm"}}, 2, 4),  # Slurm's GRES does
        ({}, 2, None),  # no nvidia-smi: nothing known to split
    ],
)
def test_trials_are_left_as_tftrain_was_given_them_where_nothing_is_split(fields, concurrent, count):
    assert shares_of(manifest(**fields), concurrent, None, count) == [None] * concurrent


def test_fewer_gpus_than_concurrent_trials_is_refused_before_anything_is_split():
    limited = manifest(sweep={**SWEEP, "limits": {"max_concurrent_trials": 4}})
    with pytest.raises(UnsupportedError, match="need 4 GPUs; this machine has 2"):
        check_concurrency(limited, Notes(), None, count=found(2))


def test_the_gpus_tftrain_may_use():
    assert named_gpus(None) is None and named_gpus("") is None and named_gpus(" ") is None
    assert named_gpus("-1") == [] and named_gpus("0, 1") == ["0", "1"] and named_gpus("0,,1") == ["0"]
    assert (
        usable_gpus(None, 2) == ["0", "1"] and usable_gpus("3,1,2", 2) == ["3", "1"] and usable_gpus(None, None) == []
    )


def test_a_trial_s_share_reaches_its_processes_over_what_tftrain_was_given(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert task_environment({}, "2,3")["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert task_environment({"CUDA_VISIBLE_DEVICES": "0"}, "2,3")["CUDA_VISIBLE_DEVICES"] == "2,3"
    # a run (no share): what tftrain was given, and environment_variables: over it, as before
    assert task_environment({}, "0,1,2,3")["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert task_environment({"CUDA_VISIBLE_DEVICES": "1"}, "0,1,2,3")["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "CUDA_VISIBLE_DEVICES" not in task_environment({}, None)
    assert task_environment({}, "1")["CUDA_VISIBLE_DEVICES"] == "1"


def test_a_target_s_gpus_are_its_settings():
    assert LocalTarget().gpus is None
    assert LocalTarget(Settings(cuda_visible_devices="4,5")).gpus == "4,5"


def test_a_docker_trial_s_containers_get_its_gpus_by_id(monkeypatch, tmp_path):
    """The docker target asks the daemon for the share's GPUs by id (it asked for all of them)."""
    from runner.targets.docker import target as docker_target

    made = []

    class Made(Exception):
        pass

    def container(client, spec, argv, env, workdir, name, labels, network_mode=None, gpu_ids=()):
        made.append(list(gpu_ids))
        raise Made

    monkeypatch.setattr(docker_target, "docker_client", lambda: None)
    monkeypatch.setattr(docker_target, "Container", container)
    task = SimpleNamespace(env={"TFTRAIN_RUN_ID": "m-1"}, argv=["python", "train.py"], cwd="/w", rank=0)
    for gpus, settings in ((True, "2,3"), (True, None), (False, "2,3")):  # each one's GPU ids: `made` below
        plan = SimpleNamespace(tasks=[task], processes=[task], driver=None, container=SimpleNamespace(gpus=gpus))
        target = docker_target.DockerTarget(Settings(cuda_visible_devices=settings))
        with pytest.raises(Made):
            target.execute(plan, None, {}, None, None)
    assert made == [["2", "3"], [], []]
