"""Slurm's accounting on the test cluster (scripts/slurm-up: slurmdbd on a MariaDB of its own): a run's
usage comes from sacct's record of its job, and run.json says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest
from slurming import queued, slurm_manifest, submitted

pytestmark = pytest.mark.integration

SLEEPY = """\
import time
time.sleep(3)
print("done", flush=True)
"""


def sacct(job: str) -> str:
    argv = ["sacct", "-j", job, "-X", "-n", "-P", "--format=State,ExitCode,ElapsedRaw,AllocTRES"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()


def test_usage_comes_from_slurm_accounting(project, cli, home, slurm_cluster):
    billed = "    mpi: auto\n  cost: {from: slurm, billing_hour: 0.5, currency: EUR}\n"  # compute.cost, beside slurm
    path = slurm_manifest(project, SLEEPY, "use_gpu: true\n", slurm=billed)
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    (job,) = submitted(result.stdout + result.stderr)
    state, exit_code, elapsed, tres = sacct(job).split("|")
    assert (state, exit_code) == ("COMPLETED", "0:0") and "gres/gpu=1" in tres, tres
    usage = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]
    allocation = usage["allocation"]
    assert allocation == {
        "source": "sacct",
        "job_id": job,
        "state": "COMPLETED",
        "exit_code": "0:0",
        "elapsed_seconds": float(elapsed),
        "cpus": allocation["cpus"],
        "gpus": 1,  # as Slurm allocated it
        "billing": int(dict(item.split("=") for item in tres.split(","))["billing"]),
        "starts": 1,
        "disagreements": [],  # sacct's record agrees with what tftrain saw
    }, allocation
    assert allocation["cpus"] >= 1 and float(elapsed) >= 3
    assert usage["cost"] == pytest.approx(allocation["billing"] * float(elapsed) / 3600 * 0.5)  # the cluster's weights
    assert "(Slurm billing: " in (home / "runs/demo-1/summary.md").read_text()
    assert usage["wall_seconds"] == float(elapsed)  # Slurm's figure, not tftrain's clock
    line = f"usage from Slurm accounting (sacct): job {job} COMPLETED exit 0:0, {float(elapsed):g} s, cpu="
    assert line in result.stdout + result.stderr
    assert "Slurm accounting (sacct) gives no usable record" not in result.stdout + result.stderr
    assert "; agrees with tftrain's view" in result.stdout + result.stderr
    assert "disagrees with tftrain" not in result.stdout + result.stderr


def test_gpus_slurm_held_beyond_the_request_are_warned_and_recorded(project, cli, home, slurm_cluster):
    """--exclusive (compute.slurm.extra_args) gives the job its whole node, the node's two GPUs too, where
    the request asked for none: tftrain's GPU-hours count none, and one warning says Slurm held two."""
    path = slurm_manifest(project, 'print("done", flush=True)\n', slurm='    extra_args: ["--exclusive"]\n')
    result = cli("run", "-f", str(path), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    (job,) = submitted(output)
    tres = dict(item.split("=") for item in sacct(job).split("|")[3].split(","))
    assert tres["gres/gpu"] == "2", tres  # the cluster's nodes have two each (scripts/slurm-up)
    found = f"job {job} held 2 GPUs (AllocTRES gres/gpu), the request asked for 0; the run's GPU-hours count 0"
    assert output.count(f"Slurm accounting (sacct) disagrees with tftrain: {found}") == 1, output
    assert output.count("disagrees with tftrain") == 1, output  # its state and clock agree
    usage = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]
    assert usage["allocation"]["disagreements"] == [found] and usage["gpu_seconds"] == 0, usage
    summary = (home / "runs/demo-1/summary.md").read_text()
    assert f"| Slurm accounting (sacct) | 1 disagreement with tftrain's view: {found} |" in summary


def test_slurmdbd_down_mid_run_falls_back_said_once(project, cli, home, slurm_cluster, repo):
    """slurmdbd stops while the job runs: the usage comes from scontrol, and one warning says why."""
    pid_file = slurm_cluster.parent / "slurmdbd.pid"
    path = slurm_manifest(project, SLEEPY.replace("time.sleep(3)", "time.sleep(6)"))
    results = []
    run = threading.Thread(target=lambda: results.append(cli("run", "-f", str(path), timeout=300)))
    run.start()
    try:
        for _ in range(600):  # until the job runs
            if any(line.endswith(" RUNNING") for line in queued()):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the job never ran: {queued()}")
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        run.join(300)
    finally:  # the cluster as it was: scripts/slurm-up starts slurmdbd again (and nothing else)
        run.join(300)
        restarted = subprocess.run([str(repo / "scripts/slurm-up")], capture_output=True, text=True, timeout=120)
        assert restarted.returncode == 0, restarted.stderr
    (result,) = results
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    (job,) = submitted(output)
    assert output.count("Slurm accounting (sacct) gives no usable record") == 1, output
    assert f"Slurm accounting (sacct) gives no usable record of job {job}: sacct failed: " in output
    usage = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]
    # the fallback of a run without accounting: scontrol's EndTime − StartTime, or tftrain's clock where
    # the tasks decided the run before slurmctld saw the job end
    source = usage["allocation"]["source"]
    assert source in ("scontrol", "tftrain") and usage["allocation"]["job_id"] == job, usage
    assert usage["wall_seconds"] == usage["allocation"]["elapsed_seconds"] >= 6
    instead = "slurmctld's (scontrol)" if source == "scontrol" else "tftrain's clock"
    assert f"; usage from {instead} instead" in output, output
    for _ in range(120):  # slurmctld kept the job's record, and hands it to slurmdbd once it is back
        if sacct(job).split("|")[0] == "COMPLETED":
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"sacct never recorded job {job}: {sacct(job)!r}")


def test_without_accounting_the_usage_is_as_before_and_nothing_is_said(
    project, cli, home, slurm_cluster, tmp_path, monkeypatch
):
    """A login node whose slurm.conf keeps no accounting (sacct: "accounting storage is disabled"):
    slurmctld's figures, no warning."""
    conf = tmp_path / "slurm.conf"
    lines = slurm_cluster.read_text().splitlines()
    conf.write_text("".join(f"{line}\n" for line in lines if not line.startswith(("Accounting", "JobAcct"))))
    (tmp_path / "gres.conf").write_text((slurm_cluster.parent / "gres.conf").read_text())
    monkeypatch.setenv("SLURM_CONF", str(conf))
    result = cli("run", "-f", str(slurm_manifest(project, SLEEPY)), timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    (job,) = submitted(output)
    warnings = [line for line in output.splitlines() if line.startswith("warning:") and "model.path" not in line]
    assert warnings == [] and "sacct" not in output, output
    allocation = json.loads((home / "runs/demo-1/run.json").read_text())["usage"]["allocation"]
    assert allocation["source"] in ("scontrol", "tftrain") and allocation["job_id"] == job, allocation
