"""What the Slurm tests share: manifests for the real two-node cluster (scripts/slurm-up), and
what they ask Slurm about the jobs tftrain submitted."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from runner.targets.slurm.target import home_comment

# tftrain's own interpreter (TensorFlow and mpi4py are in it): the tests build no virtualenv
ON_SLURM = 'user_managed: true\nmodel: {gate: "off"}\ncompute:\n  target: slurm\n'


# a training of 60 steps (0.1 s each) that checkpoints every 10 and resumes from TFTRAIN_RESUME_FROM
STEPS = """\
import os, pathlib, time
checkpoints = pathlib.Path("outputs/checkpoints")
given = os.environ.get("TFTRAIN_RESUME_FROM")
start = int((pathlib.Path(given) / "step").read_text()) if given and (pathlib.Path(given) / "step").exists() else 0
print(f"first step {start + 1}", flush=True)
for step in range(start + 1, 61):
    time.sleep(0.1)
    print(f"step {step}", flush=True)
    if step % 10 == 0:
        checkpoints.mkdir(parents=True, exist_ok=True)
        (checkpoints / "tmp").write_text(str(step))
        os.replace(checkpoints / "tmp", checkpoints / "step")
"""


def slurm_manifest(project, script: str, extra: str = "", slurm: str = "", name: str = "demo") -> Path:
    """project() on the slurm target; `slurm`: lines under compute.slurm (indented by 4)."""
    text = ON_SLURM + (f"  slurm:\n{slurm}" if slurm else "") + extra
    return project(script, text, name)


def queued(name_prefix: str = "tftrain-") -> list[str]:
    """Every job of this test still in squeue (pending, running, completing), as "NAME STATE": those
    its TFTRAIN_HOME submitted (their --comment says which), not another suite's beside it on the cluster."""
    home = os.environ.get("TFTRAIN_HOME")
    ours = home_comment(Path(home)) if home else None
    out = subprocess.run(["squeue", "-h", "--me", "-o", "%j %T %k"], capture_output=True, text=True, timeout=30).stdout
    jobs = [line.split(" ", 2) for line in out.splitlines() if line.startswith(name_prefix)]
    return [f"{job[0]} {job[1]}" for job in jobs if ours is None or job[2:] == [ours]]


def submitted(output: str) -> list[str]:
    return re.findall(r"slurm job (\d+) submitted", output)


def show_job(job: str) -> str:
    return subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30).stdout


def run_example_on_slurm(repo: Path, tmp_path: Path, cli, home: Path, name: str, extra: str):
    """examples/NAME, copied, moved onto the slurm target (tftrain's interpreter: its TensorFlow) and
    run to success: (its output, its workdir/logs)."""
    copy = tmp_path / name
    shutil.copytree(repo / "examples" / name, copy)
    manifest = copy / "tftrain.yml"
    text = manifest.read_text().replace("compute:\n", "compute:\n  target: slurm\n")
    manifest.write_text(text + "user_managed: true\n" + extra)
    result = cli("run", "-f", str(manifest), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    return result, home / f"runs/{name}-1/workdir/logs"


def slurm_model(**fields):
    """A validated manifest on the slurm target (the unit tests' Manifest, no file)."""
    from runner.manifest.model import Manifest

    return Manifest.model_validate({"name": "m", "entry_script": "train.py", "compute": {"target": "slurm"}, **fields})
