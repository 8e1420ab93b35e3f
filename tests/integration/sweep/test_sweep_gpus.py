"""Concurrent GPU trials on this machine each get their own GPUs: a real sweep through the CLI on a
machine whose `nvidia-smi -L` lists four GPUs (a stand-in: this machine has none, and nvidia-smi is
what tftrain asks), two trials at a time, each trial's processes seeing CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import json
import os

SCRIPT = """\
import json, os, time
started = time.time()
time.sleep(1.5)
os.makedirs("outputs/model", exist_ok=True)
seen = {"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": started, "end": time.time()}
open("outputs/model/gpus.json", "w").write(json.dumps(seen))
print("score: 0.5", flush=True)
"""

MANIFEST = """\
use_gpu: true
user_managed: true
metrics:
  regex:
    score: 'score: ([0-9.]+)'
sweep:
  sampling_algorithm: {type: grid}
  search_space:
    --lr: {type: choice, values: [1, 2, 3, 4]}
  objective: {primary_metric: score, goal: maximize}
  limits: {max_total_trials: 4, max_concurrent_trials: 2}
"""

NVIDIA_SMI = """#!/bin/sh
[ "$1" = "-L" ] || exit 9
for i in 0 1 2 3; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000$i-1111-2222-3333-444444444444)"; done
"""


def test_two_concurrent_gpu_trials_never_share_a_gpu(project, cli, home, tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(NVIDIA_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = project(script=SCRIPT, manifest=MANIFEST)
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "each trial on its own GPUs: 0,1; 2,3" in result.stdout
    seen = [json.loads(p.read_text()) for p in sorted((home / "runs").glob("*/workdir/outputs/model/gpus.json"))]
    assert len(seen) == 4 and {trial["gpus"] for trial in seen} == {"0,1", "2,3"}
    for one in seen:  # two trials at the same time: never the same GPUs
        for other in seen:
            if one is not other and one["start"] < other["end"] and other["start"] < one["end"]:
                assert one["gpus"] != other["gpus"]
