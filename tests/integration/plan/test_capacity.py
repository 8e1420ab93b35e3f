"""The GPU capacity check at run start, against this machine's nvidia-smi (a stand-in that lists one GPU where there is none)."""

from __future__ import annotations

import io
import os
import shutil

import pytest
from builders import PYTHON, RUNTIME

from runner.errors import UnsupportedError
from runner.manifest import load_manifest
from runner.plan.launchers import build_plan
from runner.plan.launchers.capacity import check_capacity
from runner.plan.model import PlanContext
from runner.shared.machine import gpu_count
from runner.telemetry.logger import Logger


@pytest.fixture
def gpus(tmp_path, monkeypatch) -> int:
    """This machine's GPUs; where there is no NVIDIA driver, an nvidia-smi that lists one."""
    if shutil.which("nvidia-smi") is None:
        stub = tmp_path / "bin" / "nvidia-smi"
        stub.parent.mkdir()
        stub.write_text("#!/bin/sh\necho 'GPU 0: Stand-in GPU (UUID: GPU-0)'\n")
        stub.chmod(0o755)
        monkeypatch.setenv("PATH", f"{stub.parent}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    count = gpu_count(os.environ.get("CUDA_VISIBLE_DEVICES"))
    assert count is not None and count >= 1
    return count


def test_more_gpu_processes_than_gpus_is_an_error_at_run_start(project, gpus):
    fits = project(
        manifest=f"use_gpu: true\ndistributed_training:\n  backend: multi_worker_mirrored\n  worker_count: {gpus}\n"
    )
    loaded = load_manifest(fits)
    check_capacity(
        build_plan(PlanContext(loaded.manifest, "local", PYTHON, RUNTIME, {}, ())),
        loaded.manifest,
        Logger(io.StringIO()),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )
    # parameter servers and the chief need no GPU: workers = GPUs fits
    ps = project(
        manifest=f"use_gpu: true\ndistributed_training:\n  backend: parameter_server\n  worker_count: {gpus}\n"
    )
    loaded = load_manifest(ps)
    check_capacity(
        build_plan(PlanContext(loaded.manifest, "docker", PYTHON, RUNTIME, {}, ())),
        loaded.manifest,
        Logger(io.StringIO()),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )
    over = project(
        manifest=f"use_gpu: true\ndistributed_training:\n  backend: multi_worker_mirrored\n  worker_count: {gpus + 1}\n"
    )
    loaded = load_manifest(over)  # validation gives the same answer on every machine: it does not count GPUs
    plan = build_plan(PlanContext(loaded.manifest, "local", PYTHON, RUNTIME, {}, ()))
    with pytest.raises(
        UnsupportedError,
        match=rf"^use_gpu: the job runs {gpus + 1} processes that each need a GPU, and this machine has {gpus}$",
    ):
        check_capacity(
            plan, loaded.manifest, Logger(io.StringIO()), cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES")
        )
